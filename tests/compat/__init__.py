"""One compatibility suite, run against every provider (seed 002: "scenarios written once").

A scenario (``scenarios.py``) is data: the job's files, the model's turns, run settings overrides, and what
must happen. ``runner.py`` runs it three ways with the same engine:

- ``scripted``: the ScriptedProvider replaying the turns;
- ``openai`` / ``anthropic``: the official-SDK adapters against the STRICT loopback (``tests/wire/loopback.py``),
  which streams the same turns back as real-looking SSE and refuses, with the real API's 400, any request that
  API would refuse; a refusal fails the scenario with the validator's message.

``test_compat.py`` checks each scenario's expectations per provider, and that the three runs agree: the same
sequence of (event type, tool, ok) over the compared event types (``runner.COMPARED``), the same job files
written, the same run end.

Adding a scenario: append one ``Scenario(...)`` to ``SCENARIOS`` in ``scenarios.py``, e.g.::

    Scenario(
        "policy_denial",
        job_toml=GUARDRAILS_TOML,                             # optional job.toml text (guardrails, context...)
        files={"src/a.py": "print('a')"},                     # other job files; instructions= overrides the default
        turns=[turn("Write first.", Call("write_file", {"path": "a.md", "content": "x"})),
               turn("Now read.", Call("read_file", {"path": "a.md"}))],
        settings={"context_window": 12_000},                 # RunSettings overrides, applied after job.toml
        advance_seconds_per_turn=400,                         # the run's FakeClock moves on before each request
        expect=[Ev("tool_denied", "write_file"), Ev("tool_result", "read_file", ok=True)],  # in this order
        counts={"feedback": 1}, absent=["context_masked"],   # at least n of a type / none of a type
        expect_files={"a.md": None, "src/a.py": "print"},    # None: must not exist; text: must contain it
    )

``Call.args`` may be a raw string to send malformed JSON. A run ends when the turns run out (both the
scripted provider and the loopback then fail the next request, so ``reason`` defaults to "error"); assert on
events, not on the exit (or set ``reason=``). ``check=`` takes a function of the ``Outcome`` for anything the
fields cannot say: ``Outcome.prompts`` holds the ModelRequests the engine asked for (every provider),
``Outcome.requests`` the wire bodies (SDK providers). The guardrail scenarios (seed 002) are ``GUARDRAIL_SCENARIOS``.
"""
