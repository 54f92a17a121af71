"""Simulated AI gateway: prompt checks, Redis response cache, vector search, vLLM upstreams.

`POST /chat` runs the pipeline a real LLM gateway runs, reads the degradation level from the
Redis key `ai-gateway:degradation-level` on every request (docs/drill.md: 0 normal, 1 no vector
search, 2 FAQ answers without the LLM, 3 a static page), and exposes the golden-alert metrics
(`aigw_*`) at `/metrics`. Scenarios steer it at runtime through `/drill/config`.
Run it with `python -m oncall_drill.gateway_sim --help`.
"""
