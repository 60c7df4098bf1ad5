// The inbox's client-tool forms: fields made from the call's output schema (the module the
// chat page shares), kept in step with the JSON box the form submits. Without scripts the
// JSON box alone still works; what the operator types in it directly is sent as typed.
import { schemaFields } from "./schema-form.mjs";

for (const form of document.querySelectorAll("form.result[data-schema]")) {
  let schema;
  try {
    schema = JSON.parse(form.dataset.schema);
  } catch {
    continue;
  }
  const box = form.querySelector("textarea[name=result]");
  const fields = schemaFields(schema);
  const note = document.createElement("p");
  note.className = "sf-error";
  note.setAttribute("role", "alert");
  const sync = () => {
    const got = fields.read();
    note.textContent = got.error ?? "";
    if (!got.error) box.value = JSON.stringify(got.value);
  };
  fields.element.addEventListener("input", sync);
  fields.element.addEventListener("change", sync);
  form.insertBefore(fields.element, box);
  form.insertBefore(note, box);
}
