"""Sandbox backends: the one contract every place sandboxes can live on provides
(:mod:`sandbox.backends.contract`), the backend chosen by ``KILN_SANDBOX_BACKEND``
(:mod:`sandbox.backends.choice`) and the single-engine Docker backend
(:mod:`sandbox.backends.docker_engine`)."""
