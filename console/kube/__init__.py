"""Runs on Kubernetes: ``agent-console submit JOB --kubernetes``.

A run becomes a batch/v1 Job whose pod runs the same command a local runner runs (``run --in-place`` of the run
folder, headless), on a PersistentVolumeClaim that holds the run folder, so a pod that is evicted or killed is
replaced by one that resumes the run from the volume. The modules: ``names`` (DNS-1123 names and label values),
``pack`` (the job folder as a small archive, and its unpacking in the pod), ``manifests`` (the objects, as the
API's JSON), ``api`` (sending them through the official client, imported only when something is sent).

An outer layer, like the command line: the engine never imports it.
"""
