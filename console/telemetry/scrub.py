"""What text may leave in an attribute: never a secret.

Every string attribute goes through :meth:`Scrubber.text`: the values of the environment's secret-named variables
(API keys, tokens, passwords: the names console.engine.url_secrets treats as secrets), the OTLP headers' values, and
anything shaped like a provider key are replaced by ``***``, then the text is cut to a bound. Prompt and result text
is only given to it at all when the operator opted in (``[telemetry] content = true``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from console.engine.url_secrets import SECRET_PARAM

HIDDEN = "***"
# Provider keys as they are written (sk-..., sk-ant-..., key-...), as console.providers.errors scrubs them from a
# server's message; and bearer tokens.
KEYLIKE = re.compile(r"\b(?:sk|key)-[\w\-.*]{4,}|\bBearer\s+[\w\-.~+/]{8,}=*", re.IGNORECASE)
MIN_SECRET = 6  # shorter values would take letters out of ordinary words
MAX_CHARS = 4096  # the most one attribute carries (a backend's own limit is often about this)


class Scrubber:
    def __init__(self, environ: Mapping[str, str], extra: Iterable[str] = ()) -> None:
        found = {v.strip() for k, v in environ.items() if SECRET_PARAM.search(k) and len(v.strip()) >= MIN_SECRET}
        found |= {s for s in extra if len(s) >= MIN_SECRET}
        # Whatever the case: a secret in a job folder's name reaches the spans lowercased (a job's name, its slug).
        # Longest first, so a secret holding another is hidden whole.
        secrets = sorted(found, key=len, reverse=True)
        self._secrets = re.compile("|".join(map(re.escape, secrets)), re.IGNORECASE) if secrets else None

    def text(self, value: str, limit: int = MAX_CHARS) -> str:
        if self._secrets is not None:
            value = self._secrets.sub(HIDDEN, value)
        value = KEYLIKE.sub(HIDDEN, value)
        return value if len(value) <= limit else value[:limit] + f"[... {len(value) - limit} more chars]"
