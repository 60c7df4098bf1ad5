"""``@tool``: schemas from type hints, definition-time errors, verify hooks and running handlers.

No ``from __future__ import annotations`` here on purpose: tool hints are resolved with
``typing.get_type_hints``, and plain annotations keep that independent of module globals.
"""

import asyncio
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field, ValidationError

from dbos_agents import DefinitionError, Tool, ToolContext, tool
from dbos_agents.names import check_name


class Order(BaseModel):
    sku: str
    quantity: int = 1


class Receipt(BaseModel):
    order_id: str
    total_cents: int


def make_ctx(tool_name: str = "t", tool_call_id: str = "call_1_1") -> ToolContext:
    return ToolContext(
        session_id="ses_a",
        root_session_id="ses_a",
        tool_call_id=tool_call_id,
        tool_name=tool_name,
        idempotency_key="dbosag_key",
    )


def definition_error(build: Any) -> DefinitionError:
    with pytest.raises(DefinitionError) as info:
        build()
    return info.value


# --- decorator forms -----------------------------------------------------------------------


def test_tool_without_parentheses_returns_a_tool_named_after_the_function() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    assert isinstance(add, Tool)
    assert add.name == "add"
    assert add.safe_to_retry is False
    assert add.requires_approval is False
    assert add.verify_fn is None


def test_tool_with_empty_parentheses_returns_a_tool() -> None:
    @tool()
    def add(a: int, b: int) -> int:
        return a + b

    assert isinstance(add, Tool)
    assert add.name == "add"


def test_tool_with_options_applies_them() -> None:
    @tool(name="lookup-order", description="Find an order.", safe_to_retry=True)
    def find(order_id: str) -> str:
        """Ignored docstring."""
        return order_id

    assert find.name == "lookup-order"
    assert find.description == "Find an order."
    assert find.safe_to_retry is True
    assert repr(find) == "Tool('lookup-order', safe_to_retry=True)"


def test_requires_approval_is_recorded() -> None:
    @tool(requires_approval=True)
    def refund(order_id: str) -> str:
        return order_id

    assert refund.requires_approval is True
    assert refund.safe_to_retry is False


def test_calling_the_tool_object_calls_the_raw_function() -> None:
    seen: list[tuple[int, int]] = []

    @tool
    def add(a: int, b: int) -> int:
        seen.append((a, b))
        return a + b

    assert add(2, 3) == 5
    assert add(a=1, b=1) == 2
    assert seen == [(2, 3), (1, 1)]


def test_calling_an_async_tool_object_returns_the_raw_coroutine() -> None:
    @tool
    async def double(x: int) -> int:
        return 2 * x

    assert asyncio.run(double(21)) == 42


# --- descriptions --------------------------------------------------------------------------


def test_description_is_the_first_docstring_paragraph() -> None:
    @tool
    def search(query: str) -> list[str]:
        """Search the catalogue.

        Longer explanation the model does not need.
        """
        return [query]

    assert search.description == "Search the catalogue."


def test_description_is_empty_without_docstring() -> None:
    @tool
    def nodoc(x: int) -> int:
        return x

    assert nodoc.description == ""


def test_explicit_empty_description_wins_over_docstring() -> None:
    @tool(description="")
    def documented(x: int) -> int:
        """Has a docstring."""
        return x

    assert documented.description == ""


# --- schemas -------------------------------------------------------------------------------


def test_input_schema_from_scalar_hints_and_defaults() -> None:
    @tool
    def search(query: str, limit: int = 10, exact: bool = False) -> list[str]:
        return [query]

    schema = search.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["limit"] == {"default": 10, "title": "Limit", "type": "integer"}
    assert schema["properties"]["exact"]["default"] is False
    assert schema["additionalProperties"] is False


def test_input_schema_with_pydantic_model_argument() -> None:
    @tool
    def place(order: Order, note: str | None = None) -> Receipt:
        return Receipt(order_id=order.sku, total_cents=0)

    schema = place.input_schema
    assert schema["required"] == ["order"]
    assert schema["properties"]["order"] == {"$ref": "#/$defs/Order"}
    order_def = schema["$defs"]["Order"]
    assert set(order_def["properties"]) == {"sku", "quantity"}
    assert order_def["required"] == ["sku"]
    assert order_def["properties"]["quantity"]["default"] == 1


def test_annotated_field_description_reaches_the_schema() -> None:
    @tool
    def greet(
        name: Annotated[str, Field(description="Who to greet")],
        times: Annotated[int, Field(ge=1, description="How often")] = 1,
    ) -> str:
        return name * times

    props = greet.input_schema["properties"]
    assert props["name"]["description"] == "Who to greet"
    assert props["times"]["description"] == "How often"
    assert props["times"]["minimum"] == 1
    assert props["times"]["default"] == 1


def test_return_annotation_becomes_output_schema() -> None:
    @tool
    def place(order: Order) -> Receipt:
        return Receipt(order_id="o", total_cents=1)

    out = place.output_schema
    assert out is not None
    assert out["title"] == "Receipt"
    assert set(out["properties"]) == {"order_id", "total_cents"}
    assert sorted(out["required"]) == ["order_id", "total_cents"]


def test_generic_return_annotation_schema() -> None:
    @tool
    def ids(n: int) -> list[int]:
        return list(range(n))

    assert ids.output_schema == {"type": "array", "items": {"type": "integer"}}


def test_no_return_annotation_means_no_output_schema() -> None:
    @tool
    def fire(x: int):  # type: ignore[no-untyped-def]
        return x

    assert fire.output_schema is None


def test_none_return_annotation_means_no_output_schema() -> None:
    @tool
    def fire(x: int) -> None:
        return None

    assert fire.output_schema is None


def test_tool_context_first_param_is_detected_and_excluded_from_schema() -> None:
    @tool
    def charge(ctx: ToolContext, amount_cents: int) -> str:
        return ctx.idempotency_key

    assert list(charge.input_schema["properties"]) == ["amount_cents"]
    assert charge.input_schema["required"] == ["amount_cents"]
    assert charge._sig.takes_ctx is True


def test_tool_without_context_does_not_take_it() -> None:
    @tool
    def plain(x: int) -> int:
        return x

    assert plain._sig.takes_ctx is False
    assert list(plain.input_schema["properties"]) == ["x"]


def test_tool_without_parameters_has_empty_object_schema() -> None:
    @tool
    def now() -> str:
        return "now"

    schema = now.input_schema
    assert schema["properties"] == {}
    assert "required" not in schema


# --- definition errors ---------------------------------------------------------------------


def test_missing_annotation_is_rejected_naming_the_parameter() -> None:
    def build() -> None:
        @tool
        def f(x: int, untyped) -> int:  # type: ignore[no-untyped-def]
            return x

    err = definition_error(build)
    assert err.subject == "tool 'f'"
    assert err.problems == ["parameter 'untyped' has no type annotation"]
    assert "untyped" in str(err)
    assert str(err).startswith("invalid tool 'f': ")


@pytest.mark.parametrize("kind", ["args", "kwargs"])
def test_varargs_are_rejected_naming_the_parameter(kind: str) -> None:
    def build() -> None:
        if kind == "args":

            @tool
            def f(x: int, *args: int) -> int:
                return x

        else:

            @tool
            def g(x: int, **kwargs: int) -> int:
                return x

    err = definition_error(build)
    assert len(err.problems) == 1
    assert f"parameter {kind!r}" in err.problems[0]
    assert "*args and **kwargs" in err.problems[0]


def test_positional_only_parameters_are_rejected() -> None:
    def build() -> None:
        @tool
        def f(x: int, /, y: int) -> int:
            return x

    err = definition_error(build)
    assert err.problems == ["parameter 'x': positional-only parameters are not allowed"]


def test_tool_context_not_first_is_rejected() -> None:
    def build() -> None:
        @tool
        def f(x: int, ctx: ToolContext) -> int:
            return x

    err = definition_error(build)
    assert err.problems == ["parameter 'ctx': ToolContext must be the first parameter"]


@pytest.mark.parametrize(
    "bad_name",
    [
        "1tool",
        "a" * 65,
        "has space",
        "dotted.name",
        "-leading-dash",
        "_leading_underscore",
        "ünicode",
    ],
)
def test_bad_names_are_rejected(bad_name: str) -> None:
    def build() -> None:
        @tool(name=bad_name)
        def f(x: int) -> int:
            return x

    err = definition_error(build)
    assert len(err.problems) == 1
    assert repr(bad_name) in err.problems[0]
    assert "must match" in err.problems[0]


def test_empty_name_fails_the_name_check() -> None:
    problems = check_name("tool", "")
    assert len(problems) == 1
    assert "tool name ''" in problems[0]


def test_non_string_name_fails_the_name_check() -> None:
    assert check_name("agent", None)  # type: ignore[arg-type]
    assert check_name("agent", 42)  # type: ignore[arg-type]


@pytest.mark.parametrize("good_name", ["a", "a" * 64, "Get_Order-2", "x1"])
def test_good_names_pass(good_name: str) -> None:
    assert check_name("tool", good_name) == []

    @tool(name=good_name)
    def f(x: int) -> int:
        return x

    assert f.name == good_name


@pytest.mark.parametrize("reserved", ["subagent__research", "client__confirm"])
def test_reserved_prefixes_are_rejected(reserved: str) -> None:
    def build() -> None:
        @tool(name=reserved)
        def f(x: int) -> int:
            return x

    err = definition_error(build)
    assert len(err.problems) == 1
    assert "reserved prefix" in err.problems[0]
    assert repr(reserved) in err.problems[0]


def test_reserved_prefix_is_only_a_prefix() -> None:
    assert check_name("tool", "my_subagent__x") == []
    assert check_name("tool", "subagent_x") == []


def test_safe_to_retry_and_requires_approval_exclude_each_other() -> None:
    def build() -> None:
        @tool(safe_to_retry=True, requires_approval=True)
        def f(x: int) -> int:
            return x

    err = definition_error(build)
    assert err.problems == ["safe_to_retry and requires_approval exclude each other"]


def test_one_definition_error_lists_every_problem() -> None:
    def build() -> None:
        @tool(name="9lives", safe_to_retry=True, requires_approval=True)
        def f(untyped, *args: int, **kwargs: int) -> int:  # type: ignore[no-untyped-def]
            return 0

    err = definition_error(build)
    assert len(err.problems) == 5, err.problems
    text = str(err)
    for fragment in ["'9lives'", "'untyped'", "'args'", "'kwargs'", "exclude each other"]:
        assert fragment in text
        assert sum(fragment in p for p in err.problems) == 1


def test_unresolvable_hint_is_a_definition_error() -> None:
    def build() -> None:
        @tool
        def f(x: "DoesNotExist") -> int:  # type: ignore[name-defined]  # noqa: F821
            return 0

    err = definition_error(build)
    assert any("cannot resolve type hints" in p for p in err.problems)


def test_argument_type_without_json_schema_is_rejected() -> None:
    class Opaque:
        pass

    def build() -> None:
        @tool
        def f(x: Opaque) -> int:
            return 0

    err = definition_error(build)
    assert any("JSON schema" in p for p in err.problems)


def test_return_type_without_json_schema_is_rejected() -> None:
    class Opaque:
        pass

    def build() -> None:
        @tool
        def f(x: int) -> Opaque:
            return Opaque()

    err = definition_error(build)
    assert any("return type cannot form a JSON schema" in p for p in err.problems)


def test_non_callable_handler_is_rejected() -> None:
    with pytest.raises(DefinitionError) as info:
        Tool("not callable", name="ok")  # type: ignore[arg-type]
    assert info.value.problems == ["handler is not callable"]


def test_definition_error_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="invalid tool"):

        @tool(name="bad name")
        def f(x: int) -> int:
            return x


def test_name_with_trailing_newline_is_rejected() -> None:
    assert check_name("tool", "lookup\n") != []


def test_explicit_empty_tool_name_is_rejected() -> None:
    with pytest.raises(DefinitionError):

        @tool(name="")
        def lookup(x: int) -> int:
            return x


# --- verify hooks --------------------------------------------------------------------------


def test_valid_verify_is_registered_and_returned_unchanged() -> None:
    @tool
    def charge(ctx: ToolContext, customer: str, amount_cents: int) -> Receipt:
        return Receipt(order_id=customer, total_cents=amount_cents)

    def check(ctx: ToolContext, customer: str, amount_cents: int) -> Receipt | None:
        return None

    returned = charge.verify(check)
    assert returned is check
    assert charge.verify_fn is check


def test_verify_without_context_on_tool_with_context_is_accepted() -> None:
    @tool
    def charge(ctx: ToolContext, amount_cents: int) -> int:
        return amount_cents

    @charge.verify
    def check(amount_cents: int) -> int | None:
        return None

    assert charge.verify_fn is check


def test_verify_with_mismatched_parameters_is_rejected() -> None:
    @tool
    def charge(customer: str, amount_cents: int) -> int:
        return amount_cents

    def check(customer: str) -> int | None:
        return None

    with pytest.raises(DefinitionError) as info:
        charge.verify(check)
    assert info.value.subject == "verify hook of tool 'charge'"
    assert len(info.value.problems) == 1
    assert "['customer']" in info.value.problems[0]
    assert "['customer', 'amount_cents']" in info.value.problems[0]
    assert charge.verify_fn is None


def test_verify_with_renamed_parameter_is_rejected() -> None:
    @tool
    def charge(customer: str, amount_cents: int) -> int:
        return amount_cents

    with pytest.raises(DefinitionError, match="differ"):

        @charge.verify
        def check(customer: str, cents: int) -> int | None:
            return None


def test_verify_on_safe_to_retry_tool_is_rejected() -> None:
    @tool(safe_to_retry=True)
    def read(key: str) -> str:
        return key

    with pytest.raises(DefinitionError) as info:

        @read.verify
        def check(key: str) -> str | None:
            return None

    assert info.value.problems == ["a safe_to_retry tool is re-run on recovery and needs no verify"]
    assert read.verify_fn is None


def test_verify_with_untyped_parameter_is_rejected() -> None:
    @tool
    def charge(amount_cents: int) -> int:
        return amount_cents

    with pytest.raises(DefinitionError) as info:

        @charge.verify
        def check(amount_cents):  # type: ignore[no-untyped-def]
            return None

    assert any("'amount_cents' has no type annotation" in p for p in info.value.problems)


# --- argument validation -------------------------------------------------------------------


def test_validate_arguments_returns_a_model_with_defaults() -> None:
    @tool
    def place(order: Order, note: str = "-") -> str:
        return note

    args = place.validate_arguments({"order": {"sku": "A1"}})
    assert isinstance(args, BaseModel)
    assert isinstance(args.order, Order)  # type: ignore[attr-defined]
    assert args.order.quantity == 1  # type: ignore[attr-defined]
    assert args.note == "-"  # type: ignore[attr-defined]


def test_validate_arguments_rejects_extra_arguments() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValidationError) as info:
        add.validate_arguments({"a": 1, "b": 2, "c": 3})
    errors = info.value.errors()
    assert [(e["type"], e["loc"]) for e in errors] == [("extra_forbidden", ("c",))]


def test_validate_arguments_rejects_wrong_types() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValidationError) as info:
        add.validate_arguments({"a": "one", "b": 2})
    assert [e["loc"] for e in info.value.errors()] == [("a",)]


def test_validate_arguments_rejects_missing_required() -> None:
    @tool
    def add(a: int, b: int) -> int:
        return a + b

    with pytest.raises(ValidationError) as info:
        add.validate_arguments({"a": 1})
    assert [(e["type"], e["loc"]) for e in info.value.errors()] == [("missing", ("b",))]


def test_validate_arguments_enforces_field_constraints() -> None:
    @tool
    def repeat(times: Annotated[int, Field(ge=1)]) -> int:
        return times

    with pytest.raises(ValidationError):
        repeat.validate_arguments({"times": 0})
    assert repeat.validate_arguments({"times": 3}).times == 3  # type: ignore[attr-defined]


def test_tools_module_reexports_pydantic_validation_error() -> None:
    from dbos_agents import tools

    assert tools.ValidationError is ValidationError


# --- running -------------------------------------------------------------------------------


def test_run_sync_handler_with_context_dumps_model_output() -> None:
    seen: list[tuple[ToolContext, Order]] = []

    @tool
    def place(ctx: ToolContext, order: Order) -> Receipt:
        seen.append((ctx, order))
        return Receipt(order_id=f"{ctx.tool_call_id}:{order.sku}", total_cents=order.quantity * 5)

    ctx = make_ctx("place", "call_7")
    args = place.validate_arguments({"order": {"sku": "A1", "quantity": 3}})
    out = asyncio.run(place.run(ctx, args))
    assert out == {"order_id": "call_7:A1", "total_cents": 15}
    assert type(out) is dict
    assert seen[0][0] is ctx
    assert seen[0][1] == Order(sku="A1", quantity=3)


def test_run_async_handler_without_context() -> None:
    @tool
    async def add(a: int, b: int) -> int:
        await asyncio.sleep(0)
        return a + b

    out = asyncio.run(add.run(make_ctx(), add.validate_arguments({"a": 2, "b": 40})))
    assert out == 42


def test_run_async_handler_with_context_and_model_output() -> None:
    @tool
    async def place(ctx: ToolContext, order: Order) -> Receipt:
        return Receipt(order_id=ctx.idempotency_key, total_cents=order.quantity)

    out = asyncio.run(place.run(make_ctx(), place.validate_arguments({"order": {"sku": "x"}})))
    assert out == {"order_id": "dbosag_key", "total_cents": 1}


def test_run_without_return_annotation_still_dumps_models_to_json() -> None:
    @tool
    def place(order: Order):  # type: ignore[no-untyped-def]
        return {"receipt": Receipt(order_id=order.sku, total_cents=9), "items": (1, 2)}

    out = asyncio.run(place.run(make_ctx(), place.validate_arguments({"order": {"sku": "s"}})))
    assert out == {"receipt": {"order_id": "s", "total_cents": 9}, "items": [1, 2]}


def test_run_propagates_handler_exceptions() -> None:
    @tool
    def boom(x: int) -> int:
        raise RuntimeError(f"boom {x}")

    with pytest.raises(RuntimeError, match="boom 3"):
        asyncio.run(boom.run(make_ctx(), boom.validate_arguments({"x": 3})))


def test_run_validates_output_that_does_not_match_the_annotation() -> None:
    @tool
    def place(order: Order) -> Receipt:
        return {"order_id": "o", "total_cents": "12"}  # type: ignore[return-value]

    out = asyncio.run(place.run(make_ctx(), place.validate_arguments({"order": {"sku": "s"}})))
    assert out == {"order_id": "o", "total_cents": 12}


def test_run_verify_returning_none_means_effect_did_not_happen() -> None:
    calls: list[str] = []

    @tool
    def charge(ctx: ToolContext, customer: str) -> Receipt:
        return Receipt(order_id=customer, total_cents=1)

    @charge.verify
    def check(ctx: ToolContext, customer: str) -> Receipt | None:
        calls.append(f"{ctx.tool_call_id}:{customer}")
        return None

    ctx = make_ctx("charge", "call_3")
    result = asyncio.run(charge.run_verify(ctx, charge.validate_arguments({"customer": "c1"})))
    assert result == (False, None)
    assert calls == ["call_3:c1"]


def test_run_verify_returning_a_value_means_effect_happened() -> None:
    @tool
    def charge(customer: str) -> Receipt:
        return Receipt(order_id=customer, total_cents=1)

    @charge.verify
    async def check(customer: str) -> Receipt | None:
        return Receipt(order_id=f"found-{customer}", total_cents=250)

    result = asyncio.run(
        charge.run_verify(make_ctx(), charge.validate_arguments({"customer": "c"}))
    )
    assert result == (True, {"order_id": "found-c", "total_cents": 250})
