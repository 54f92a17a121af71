"""The `err_code` / `err_msg` labels dcgm-exporter (>= 4.0.0) puts on `DCGM_FI_DEV_XID_ERRORS`.

dcgm-exporter's GPU collector (`internal/pkg/collector/gpu_collector.go`, since commit 5f9250c
"DCGM-Exporter 4.0.0") adds two attributes to every Xid row: `err_code`, the Xid as text, and
`err_msg`, its text from the exporter's table (`internal/pkg/collector/xid_errors.go`, from
NVIDIA's Xid catalog; "Unknown Error" past its end). Each new Xid is therefore a new series
with a constant value. DCGM's blank value (no Xid since the host engine started) is skipped
(`toString` → `skipDCGMValue`), so on a default install the gauge is absent until the first
Xid. The simulator knows the messages of the Xids below only, and refuses others rather than
invent a message.
"""

from __future__ import annotations

#: Xid → err_msg, verbatim from dcgm-exporter's `xidErrCodeToText` at d5e5f51.
XID_MESSAGES = {
    13: "Graphics Engine Exception",
    31: "GPU memory page fault",
    43: "GPU stopped processing",
    45: (
        "Preemptive cleanup, due to previous errors -- Most likely to see when running "
        "multiple cuda"
    ),
    48: "Double Bit ECC Error",
    61: "Internal micro-controller breakpoint/warning",
    62: "Internal micro-controller halt",
    63: "ECC page retirement or row remapping recording event",
    64: "ECC page retirement or row remapper recording failure",
    68: "NVDEC0 Exception",
    69: "Graphics Engine class error",
    74: "NVLINK Error",
    79: "GPU has fallen off the bus",
    92: "High single-bit ECC error rate",
    94: "Contained ECC error",
    95: "Uncontained ECC error",
    119: "GSP RPC Timeout",
    120: "GSP Error",
}


def xid_attributes(xid: int) -> dict[str, str]:
    """The attributes dcgm-exporter adds to an Xid row (sorted by name, as it renders them)."""
    return {"err_code": str(xid), "err_msg": XID_MESSAGES[xid]}
