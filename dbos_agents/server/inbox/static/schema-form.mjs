// Form fields for a wait's answer, made from the JSON schema the wait expects (a client
// tool's output schema, as `dbos-agents pending` shows it). One module for every page that
// answers waits: the inbox loads it from /inbox/static/, the chat page bundles it (esbuild).
// Plain DOM, no dependencies. What a field cannot express (arrays, nested objects, a schema
// of no known shape) is a JSON text box; the caller's server validates the answer anyway.

function resolveRef(schema, root) {
  let s = schema ?? {};
  for (let hops = 0; typeof s.$ref === "string" && hops < 16; hops++) {
    const path = s.$ref.replace(/^#\//, "").split("/");
    s = path.reduce((node, key) => (node ?? {})[key], root) ?? {};
  }
  return s;
}

/** The schema as fields see it: `$ref`s followed, an optional value (`anyOf [X, null]`)
 * read as X. */
export function shapeOf(schema, root = schema) {
  const s = resolveRef(schema, root);
  const branches = s.anyOf ?? s.oneOf;
  if (Array.isArray(branches)) {
    const real = branches.filter((b) => resolveRef(b, root).type !== "null");
    if (real.length === 1) return { ...s, ...shapeOf(real[0], root), anyOf: undefined };
  }
  return s;
}

function properties(schema) {
  const s = shapeOf(schema);
  if (s.type !== "object" || typeof s.properties !== "object") return null;
  return s;
}

/** The one required boolean of a yes/no answer (every other property optional), or null:
 * such a wait is answered with two buttons. */
export function yesNoKey(schema) {
  const s = properties(schema);
  if (s === null) return null;
  const required = new Set(s.required ?? []);
  const keys = Object.keys(s.properties);
  const bools = keys.filter((k) => shapeOf(s.properties[k], schema).type === "boolean");
  if (bools.length !== 1 || !required.has(bools[0])) return null;
  return keys.every((k) => k === bools[0] || !required.has(k)) ? bools[0] : null;
}

function node(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined && v !== null) el.setAttribute(k, v);
  el.append(...children);
  return el;
}

let counter = 0;

// One field: its element and how to read it ({value} | {error} | {missing}).
function field(name, prop, root, required) {
  const s = shapeOf(prop, root);
  const id = `sf-${++counter}`;
  const title = s.title ?? name;
  const label = node("label", { for: id }, title, required ? node("span", { class: "req" }, " *") : "");
  const hint = s.description ? node("small", { class: "hint" }, s.description) : "";
  const attrs = { id, name, "data-field": name, required: required ? "" : null };
  let input;
  let read;
  if (Array.isArray(s.enum) && s.enum.every((v) => typeof v === "string")) {
    input = node("select", attrs, ...(required ? [] : [node("option", { value: "" }, "")]),
      ...s.enum.map((v) => node("option", { value: v }, v)));
    if (s.default !== undefined) input.value = s.default;
    read = () => (input.value === "" ? { missing: true } : { value: input.value });
  } else if (s.type === "boolean") {
    input = node("input", { ...attrs, type: "checkbox", required: null });
    input.checked = s.default === true;
    read = () => ({ value: input.checked });
  } else if (s.type === "integer" || s.type === "number") {
    input = node("input", { ...attrs, type: "number", step: s.type === "integer" ? "1" : "any",
      min: s.minimum, max: s.maximum, inputmode: s.type === "integer" ? "numeric" : "decimal" });
    if (s.default !== undefined) input.value = String(s.default);
    read = () => {
      if (input.value.trim() === "") return { missing: true };
      const n = Number(input.value);
      if (!Number.isFinite(n) || (s.type === "integer" && !Number.isInteger(n)))
        return { error: `${title}: a${s.type === "integer" ? " whole" : ""} number` };
      return { value: n };
    };
  } else if (s.type === "string") {
    const long = (s.maxLength ?? 0) > 200 || s.format === "textarea";
    input = node(long ? "textarea" : "input", { ...attrs, rows: long ? "3" : null,
      maxlength: s.maxLength, autocomplete: "off" });
    if (s.default !== undefined) input.value = s.default;
    read = () => (input.value === "" ? { missing: true } : { value: input.value });
  } else {
    input = node("textarea", { ...attrs, rows: "3", class: "json", placeholder: "JSON" });
    if (s.default !== undefined) input.value = JSON.stringify(s.default);
    read = () => {
      if (input.value.trim() === "") return { missing: true };
      try {
        return { value: JSON.parse(input.value) };
      } catch {
        return { error: `${title}: not valid JSON` };
      }
    };
  }
  return { row: node("div", { class: "sf-field" }, label, input, hint), input, read };
}

/**
 * Fields for `schema` (an object schema: one per property; anything else: one JSON box).
 * Returns `{ element, read, focus }`: `read()` is `{ value }` or `{ error }` (a message
 * for the person filling it in).
 */
export function schemaFields(schema) {
  const s = properties(schema);
  const box = node("div", { class: "schema-fields" });
  if (s === null) {
    const one = field("answer", schema && Object.keys(schema).length ? schema : {}, schema, true);
    box.append(one.row);
    return { element: box, read: () => (one.read().missing ? { error: "an answer is required" } : one.read()), focus: () => one.input.focus() };
  }
  const required = new Set(s.required ?? []);
  // Required fields first: the stored schema's key order is not the model's (Postgres
  // keeps JSON object keys shortest first).
  const entries = Object.entries(s.properties);
  const ordered = [...entries.filter(([k]) => required.has(k)), ...entries.filter(([k]) => !required.has(k))];
  const fields = ordered.map(([name, prop]) => [
    name,
    field(name, prop, schema, required.has(name)),
  ]);
  box.append(...fields.map(([, f]) => f.row));
  const read = () => {
    const value = {};
    for (const [name, f] of fields) {
      const got = f.read();
      if (got.error) return { error: got.error };
      if (got.missing) {
        if (required.has(name)) return { error: `${f.input.labels[0]?.firstChild?.textContent ?? name} is required` };
        continue;
      }
      value[name] = got.value;
    }
    return { value };
  };
  return { element: box, read, focus: () => fields[0]?.[1].input.focus() };
}
