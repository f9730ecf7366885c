"""A Hypothesis property over approval answers, through the user-input broker itself.

Each example: a tool approval is pending in a broker; a drawn list of answers is given with
``broker.answer``. Every malformed one is refused with a reason and the SDK's ``can_use_tool``
call is still waiting (nothing reached the CLI); the first well-formed one is accepted and the
call returns exactly the SDK result object the answer means. The oracle below is written from
the documented answer shape, not from the code under test.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import trio
import trio.testing
from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny, ToolPermissionContext
from claude_agent_sdk.types import PermissionRuleValue, PermissionUpdate
from hypothesis import given, settings
from hypothesis import strategies as st

from claude_trio.actors.extensions.broker import (
    AnswerAccepted,
    AnswerRejected,
    UserInputBroker,
    run_user_input_broker,
)
from claude_trio.protocol.session.events import Event, UserInputRequest

TOOL_INPUT = {"command": "echo hi"}
SUGGESTION = {
    "type": "addRules",
    "rules": [{"toolName": "Bash", "ruleContent": "echo *"}],
    "behavior": "allow",
    "destination": "projectSettings",
}
GOOD_RULES = ["Bash(npm test:*)", "Read", "mcp__trio__lookup", "Edit(src/**)"]
BAD_RULES = ["", "Bash(", "mcp_", "rm -rf"]

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8))
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
decision = st.sampled_from(["allow", "deny", "always", "maybe", "", "ALLOW"])
field_values = {
    "input": st.one_of(
        st.none(), st.dictionaries(st.text(max_size=5), json_leaf, max_size=3), json_value
    ),
    "message": st.one_of(st.none(), st.text(max_size=10), json_leaf),
    "interrupt": st.one_of(st.booleans(), json_leaf),
    "rules": st.one_of(
        st.lists(st.sampled_from(GOOD_RULES), max_size=3),
        st.lists(st.sampled_from(GOOD_RULES + BAD_RULES), max_size=3),
        st.text(max_size=6),
        json_value,
    ),
}


@st.composite
def mapping_answer(draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if draw(st.booleans()) or draw(st.booleans()):
        out["decision"] = draw(decision)
    for key, strategy in field_values.items():
        if draw(st.booleans()):
            out[key] = draw(strategy)
    if draw(st.integers(0, 9)) == 0:
        out[draw(st.sampled_from(["colour", "Decision", "updated_input"]))] = 1
    return out


answers = st.one_of(
    mapping_answer(),
    st.sampled_from(["allow", "deny", "always", "yes", "no", ""]),
    json_value,
)


def expected(answer: Any) -> Any:
    """The SDK result a well-formed answer means, or None for a malformed one (the spec)."""
    if isinstance(answer, str):
        answer = {"decision": answer}
    if not isinstance(answer, Mapping):
        return None
    if set(answer) - {"decision", "input", "message", "interrupt", "rules"}:
        return None
    kind = answer.get("decision")
    tool_input = answer.get("input")
    message = answer.get("message")
    interrupt = answer.get("interrupt", False)
    rules = answer.get("rules", [])
    if kind not in ("allow", "deny", "always"):
        return None
    if tool_input is not None and not isinstance(tool_input, dict):
        return None
    if message is not None and (not isinstance(message, str) or not message.strip()):
        return None
    if not isinstance(interrupt, bool) or not isinstance(rules, list):
        return None
    if not all(rule in GOOD_RULES for rule in rules):
        return None
    if kind == "deny":
        if tool_input is not None or rules:
            return None
        return PermissionResultDeny(
            message=message or "The user denied this tool call.", interrupt=interrupt
        )
    if message is not None or interrupt:
        return None
    run_with = tool_input if tool_input is not None else TOOL_INPUT
    if kind == "allow":
        return None if rules else PermissionResultAllow(updated_input=run_with)
    if rules:
        updates = [
            PermissionUpdate(
                type="addRules",
                rules=[_rule(rule) for rule in rules],
                behavior="allow",
                destination="session",
            )
        ]
    else:
        updates = [PermissionUpdate.from_dict({**SUGGESTION, "destination": "session"})]
    return PermissionResultAllow(updated_input=run_with, updated_permissions=updates)


def _rule(text: str) -> PermissionRuleValue:
    if "(" in text:
        name, content = text[:-1].split("(", 1)
        return PermissionRuleValue(tool_name=name, rule_content=content)
    return PermissionRuleValue(tool_name=text)


async def _give(given_answers: list[Any]) -> None:
    events: list[Event] = []

    def emit(event: Event) -> Event:
        events.append(event)
        return event

    broker = UserInputBroker(emit=emit, send_reply=lambda reply: None, handler=None, timeout=60)
    replies: list[Any] = []
    context = ToolPermissionContext(
        suggestions=[PermissionUpdate.from_dict(SUGGESTION)], tool_use_id="toolu_1"
    )
    async with trio.open_nursery() as nursery:
        await nursery.start(run_user_input_broker, broker)

        async def sdk_side() -> None:
            replies.append(await broker.can_use_tool("Bash", dict(TOOL_INPUT), context))

        nursery.start_soon(sdk_side)
        await trio.testing.wait_all_tasks_blocked()
        (request,) = [e for e in events if isinstance(e, UserInputRequest)]
        assert request.source == "tool_permission"
        want = None
        for answer in given_answers:
            want = expected(answer)
            receipt = broker.answer(request.request_id, answer)
            if want is None:
                assert isinstance(receipt, AnswerRejected), answer
                assert receipt.reason  # says what is wrong
                await trio.testing.wait_all_tasks_blocked()
                assert replies == [], "a refused answer reached the CLI"
                continue
            assert receipt == AnswerAccepted(request_id=request.request_id)
            break
        if want is None:
            broker.answer(request.request_id, "allow")
            want = PermissionResultAllow(updated_input=TOOL_INPUT)
        await trio.testing.wait_all_tasks_blocked()
        assert replies == [want]
        broker.close()
    assert broker.pending_ids == ()


@settings(max_examples=300, deadline=None)
@given(st.lists(answers, min_size=1, max_size=6))
def test_malformed_answers_are_refused_and_well_formed_ones_map_exactly(
    given_answers: list[Any],
) -> None:
    trio.run(_give, given_answers, clock=trio.testing.MockClock(autojump_threshold=0))
