"""Function tools over the Responses API: calls as `function_call` items (whole and streamed),
results fed back as `function_call_output`, forced choices, and the OpenAI Agents SDK running an
agent with a tool against the server. The mock model calls the tool its prompt names
(`#tool:llama3#`, read by `--tool-call-parser llama3`) and, once the tool's result is in the
prompt, answers with that result (`#relay#`)."""

from __future__ import annotations

import json

import pytest

from tests.openai.test_tools import WEATHER as CHAT_WEATHER

WEATHER = {"type": "function", **CHAT_WEATHER["function"]}  # the Responses API's flat shape of a tool
DALLAS = {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}
QUESTION = "What is the weather in Dallas, Texas in Fahrenheit? #tool:llama3# #relay#"
RESULT = "It is 85 degrees and sunny in Dallas."


def test_function_call_round_trip(llama3_server):
    client = llama3_server.client()
    asked = client.responses.create(model="mock_llm", input=QUESTION, tools=[WEATHER])
    assert asked.status == "completed"
    (call,) = asked.output
    assert call.type == "function_call" and call.name == "get_current_weather" and call.status == "completed"
    assert call.id.startswith("fc_") and call.call_id and call.call_id != call.id
    assert json.loads(call.arguments) == DALLAS
    assert asked.output_text == "" and asked.tools[0].name == "get_current_weather"
    result = {"type": "function_call_output", "call_id": call.call_id, "output": RESULT}
    # continued from the stored response ...
    answered = client.responses.create(model="mock_llm", previous_response_id=asked.id, input=[result], tools=[WEATHER])
    assert answered.output_text == RESULT
    # ... or with the whole conversation sent again, the call replayed as the SDK returned it
    replayed = [{"role": "user", "content": QUESTION}, call.model_dump(exclude_none=True), result]
    again = client.responses.create(model="mock_llm", input=replayed, tools=[WEATHER], store=False)
    assert again.output_text == RESULT


def test_function_call_streamed(llama3_server):
    client = llama3_server.client()
    events = list(client.responses.create(model="mock_llm", input=QUESTION, tools=[WEATHER], stream=True))
    types = [event.type for event in events]
    assert [t for i, t in enumerate(types) if i == 0 or types[i - 1] != t] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    added = events[2].item
    assert added.type == "function_call" and added.name == "get_current_weather" and added.status == "in_progress"
    deltas = "".join(event.delta for event in events if event.type == "response.function_call_arguments.delta")
    done = next(event for event in events if event.type == "response.function_call_arguments.done")
    assert deltas == done.arguments and json.loads(done.arguments) == DALLAS
    (call,) = events[-1].response.output
    assert (call.id, call.call_id, call.arguments) == (added.id, added.call_id, done.arguments)
    with client.responses.stream(model="mock_llm", input=QUESTION, tools=[WEATHER]) as stream:
        final = stream.get_final_response()
    assert final.output[0].type == "function_call" and json.loads(final.output[0].arguments) == DALLAS


def test_named_tool_choice_forces_the_call(llama3_server):
    reply = llama3_server.client().responses.create(
        model="mock_llm",
        input="Any weather?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_current_weather"},
    )
    (call,) = reply.output
    assert call.name == "get_current_weather"
    assert json.loads(call.arguments) == {"city": "x", "state": "x", "unit": "celsius"}  # the schema, filled
    assert reply.tool_choice.name == "get_current_weather"


def test_tool_choice_none_answers_in_text(llama3_server):
    reply = llama3_server.client().responses.create(
        model="mock_llm", input="#say:no tools today#", tools=[WEATHER], tool_choice="none"
    )
    assert [item.type for item in reply.output] == ["message"] and reply.output_text == "no tools today"


@pytest.mark.parametrize("streamed", [False, True])
async def test_agents_sdk_runs_an_agent_with_a_tool(llama3_server, streamed):
    from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

    set_tracing_disabled(True)
    calls = []

    @function_tool
    def get_current_weather(city: str, state: str, unit: str) -> str:
        """Get the current weather in a given location."""
        calls.append((city, state, unit))
        return f"It is 85 degrees {unit} and sunny in {city}, {state}."

    agent = Agent(
        name="weather",
        instructions="Use the tool to answer.",
        tools=[get_current_weather],
        model=OpenAIResponsesModel(model="mock_llm", openai_client=llama3_server.async_client()),
    )
    if streamed:
        result = Runner.run_streamed(agent, QUESTION)
        kinds = [event.type async for event in result.stream_events()]
        assert "raw_response_event" in kinds
    else:
        result = await Runner.run(agent, QUESTION)
    assert calls == [("Dallas", "TX", "fahrenheit")]
    assert result.final_output == "It is 85 degrees fahrenheit and sunny in Dallas, TX."
