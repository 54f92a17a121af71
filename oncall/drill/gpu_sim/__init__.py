"""Simulated dcgm-exporter: per-GPU DCGM gauges that follow the bound vLLM simulators.

Each GPU is bound to one vLLM simulator; on every scrape the exporter reads that server's
`GET /drill/state` and derives framebuffer memory (weights + KV usage × KV pool), utilisation,
temperature and power. Faults (`POST /drill/fault`) fill the framebuffer, raise an XID, hang
`/metrics` or make it answer 500. Run it with `python -m oncall.drill.gpu_sim --help`.
"""
