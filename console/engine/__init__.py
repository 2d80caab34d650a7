"""The headless engine: it runs an agent on a job, keeps it on track, and records everything it does.

It never imports textual, the TUI, the providers, the settings or the CLI (import-linter contracts): it owns the
protocols the layers above implement, and everything an operator can do is a method or a function here.

Entry points:

- :class:`supervisor.Supervisor` runs one run (its sessions, restarts and operator commands);
  :func:`loop.run_agent_session` runs one session of it. :mod:`run_end` says how a run ended (its outcome, the
  jobs table's word), :mod:`repair` what is moved aside before a run, :mod:`tool_setup` the tools' docs and the
  commands' header.
- :mod:`job` (a job's folder and job.toml), :mod:`job_config` (its guardrails and tools), :mod:`launch` (how a run
  was started, so a resume is the same run), :mod:`runs` (run ids), :mod:`store` (the jobs store: embedded
  SQLite, or PostgreSQL shared by several machines).
- :mod:`control` (commands into a run: the inbox, the run lock), :mod:`needs` (what a run asks its operator).
- :mod:`events` (the typed event stream, its log and its readers): every view is a fold of it.
- :func:`text.safe_text`: agent text made safe to print.

Protocols it owns: :class:`model.Provider` (a model's stream), :class:`clock.Clock`, the guardrails'
``ToolPolicy``, ``FeedbackProvider``, ``TaskCompletionChecker`` and ``World``, :class:`needs.OperatorState`.

The seeds' concepts, and where they live:

- 000/001, the guardrails system: :mod:`context.layers` (the five layers), :mod:`plan` (main_plan.md),
  :mod:`todos` (the Layer 2 list), :mod:`phases` (bootstrap, transitions, rewind, completion), :mod:`workspace`
  (workspace_summary.md), :mod:`experiences` (experiences.md), :mod:`record` (what the record shows done).
- 002, the guardrails specification: :mod:`guardrails` (policies, feedback, completion checkers, budgets,
  escalation), :mod:`enforcement` (where they meet the run), :mod:`tools.registry` (the one gate of every call).
- 003, context and knowledge: :mod:`memory` (working memory), :mod:`events` (the JSONL audit log).
- 004, context resilience: :mod:`context` (tokens, pressure, masking, summary, carryover); the wind-down in
  :mod:`loop`, the restart in :mod:`supervisor`.
- Trust: :mod:`sandbox` (the one door to job files), :mod:`tools.confine` and :mod:`tools.process` (job-declared
  commands, confined and bounded), :mod:`journal` and :mod:`runtime` (every effect recorded before it is relied
  on), :mod:`atomic`, :mod:`state` (state files validated when read back), :mod:`failpoints` (the kill points).
"""
