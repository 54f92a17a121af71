"""Simulated dcgm-exporter: per-GPU DCGM gauges for the pods the kubelet puts on each GPU.

Framebuffer memory is what each pod's vLLM pre-allocated at start (`--gpu-memory-utilization`
of the card plus its context), flat whatever the load; utilisation, temperature and power
follow the pods' vLLM simulators (`GET /drill/state`). Labels come in the layout a default Helm
install gives, or another (`layout.py`: honorLabels, `hostname`, GPU sharing, MIG). Faults
(`POST /drill/fault`) fill the framebuffer from outside Kubernetes, raise an Xid, hang
`/metrics` or make it answer 500. Run it with `python -m oncall_drill.gpu_sim --help`.
"""
