"""Names Kubernetes accepts: DNS-1123 labels for objects, label values, from any text an operator's folder has."""

from __future__ import annotations

import hashlib
import re
import unicodedata

# A Job's name is also its pods' `job-name` label value: at most 63 characters, as a DNS-1123 label.
MAX_LABEL = 63
# The longest suffix this package adds to a run's name (`-config`): the base name leaves room for it.
MAX_SUFFIX = len("-config")
MAX_BASE = MAX_LABEL - MAX_SUFFIX
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _ascii(text: str) -> str:
    """Accents dropped (``é`` -> ``e``), then everything but ``[a-z0-9]`` a single hyphen."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii").lower()
    return re.sub(r"[^a-z0-9]+", "-", folded).strip("-")


def _digest(text: str, n: int = 6) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:n]


def dns_label(text: str, limit: int = MAX_BASE, fallback: str = "job") -> str:
    """``text`` as a DNS-1123 label of at most ``limit`` characters. A name that had to be cut, or that had nothing
    usable (``日本語``), ends with a hash of the original, so two different long names stay two names."""
    limit = max(8, min(limit, MAX_LABEL))
    base = _ascii(text)
    if base and len(base) <= limit:
        return base
    tag = _digest(text)
    head = (base or fallback)[: limit - len(tag) - 1].rstrip("-")
    return f"{head}-{tag}" if head else tag


def label_value(text: str) -> str:
    """``text`` as a label value (at most 63 of ``[A-Za-z0-9-_.]``, alphanumeric at both ends; may be empty)."""
    value = re.sub(r"[^A-Za-z0-9_.-]+", "-", text)
    value = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", value)
    if len(value) <= MAX_LABEL and value == text:
        return value
    tag = _digest(text)
    head = re.sub(r"[^A-Za-z0-9]+$", "", value[: MAX_LABEL - len(tag) - 1])
    return f"{head}-{tag}" if head else tag
