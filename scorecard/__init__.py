"""The injection scorecard: AgentDojo's suites run through Loopdesk's own gate.

A measuring instrument, not part of the product (nothing in app/ imports it):

- server.py serves one suite's tools, over MCP, on its injected environment;
- model.py is the scripted "obedient" model: it does whatever the last text it read says;
- harness.py registers the server in a throwaway Loopdesk and drives every task through
  the real loop, declining every card;
- report.py writes the table into docs/security.md beside the published figures;
- published.py holds those figures (CaMeL and undefended agents, per suite), each with
  the place it was read from.

`make scorecard` (or `python -m scorecard --help`) runs it."""
