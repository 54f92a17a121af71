"""Read-only probes: named measurements of Kubernetes, GPUs, Redis, vLLM and Prometheus."""
