"""`agent-console serve`: the operator's runs from a phone or a browser, behind a login (issue 35)."""
