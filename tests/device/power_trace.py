"""What the device check reads off the power tests' telemetry (samples.json that the burn_in power checks keep).

:func:`power_summary`: the collection's judged mean power as a fraction of TDP, peak temperature, the share of
samples carrying each NVML clock-event reason, the achieved sampling rate, and for the pulsating load the edges
seen in the power trace against the pulses commanded.  :func:`plot`: power, temperature and SM clock over time,
on-phases shaded.
"""

import statistics

try:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot
    PLOT_ERROR = None
except ImportError as exc:  # the device image has matplotlib; elsewhere the plot is not_run
    pyplot = None
    PLOT_ERROR = str(exc)

# A phase's first samples are the ramp (the load pausing or resuming): skipped when measuring its level.
SETTLE_S = 0.5
# Edge thresholds, as fractions of the on/off swing above the off level (hysteresis against noise).
RISE_AT, FALL_AT = 0.6, 0.4
# A swing below this fraction of TDP is no pulse at all: no edge is counted.
MIN_SWING_OF_TDP = 0.2


def _in(t, windows, settle=0.0):
    return any(a + settle <= t < b for a, b in windows)


def _off_windows(windows, end):
    edges = [0.0] + [x for a, b in windows for x in (a, b)] + [end]
    return [(edges[i], edges[i + 1]) for i in range(0, len(edges) - 1, 2) if edges[i + 1] > edges[i]]


def edges(trace, off_w, on_w):
    """``(rising, falling, rise_times)`` of ``trace`` ``[(t_s, W)]`` crossing the hysteresis band between the levels."""
    swing = on_w - off_w
    high, low = off_w + RISE_AT * swing, off_w + FALL_AT * swing
    falling = 0
    rise_times = []
    state = None
    for t, power in trace:
        if power >= high and state != "on":
            if state == "off":
                rise_times.append(t)
            state = "on"
        elif power <= low and state != "off":
            falling += state == "on"
            state = "off"
    return len(rise_times), falling, rise_times


def power_summary(doc, observed, pulse):
    """Figures of one power test from its ``samples.json`` ``doc`` and the check's ``observed`` (per_gpu) for GPU 0."""
    samples = [s for s in doc.get("samples", []) if s["gpu"] == 0]
    tdp = doc.get("tdp_w")
    judged = ((observed or {}).get("per_gpu") or {}).get("0") or {}
    out = {"tdp_w": tdp, "interval_s": doc.get("interval_s"), "samples": len(samples), "gpus": len(
        {s["gpu"] for s in doc.get("samples", [])}), "telemetry": doc.get("backend"), "errors": len(doc.get("errors", []))}
    times = [s["t_s"] for s in samples]
    out["achieved_hz"] = round((len(times) - 1) / (times[-1] - times[0]), 2) if len(times) > 1 and times[-1] > times[0] \
        else None
    out["mean_power_w"] = judged.get("mean_power_w")
    out["fraction_of_tdp"] = round(judged["mean_power_w"] / tdp, 3) if judged.get("mean_power_w") and tdp else None
    powers = [s["power_w"] for s in samples if s["power_w"] is not None]
    out["max_power_w"] = max(powers) if powers else None
    temps = [s["temp_c"] for s in samples if s["temp_c"] is not None]
    out["max_temp_c"] = max(temps) if temps else None
    clocks = [s["sm_clock_mhz"] for s in samples if s["sm_clock_mhz"] is not None]
    out["sm_clock_mhz"] = {"min": min(clocks), "max": max(clocks), "median": statistics.median(clocks)} if clocks else None
    # NVML may not answer the clock-event query: samples without a mask are unread, not "no throttle"
    read = [s for s in samples if s.get("throttle_mask") is not None]
    out["throttle_read_pct"] = round(100.0 * len(read) / len(samples), 1) if samples else None
    reasons = sorted({r for s in samples for r in s.get("throttle") or []})
    out["throttle_pct"] = {r: round(100.0 * sum(r in (s.get("throttle") or []) for s in samples) / len(samples), 1)
                           for r in reasons}
    out["power_brake_events"] = judged.get("power_brake_events")
    if not pulse:
        return out
    windows = [(a, b) for a, b in doc.get("on_windows", []) if a is not None and b is not None]
    trace = [(s["t_s"], s["power_w"]) for s in samples if s["power_w"] is not None]
    end = trace[-1][0] if trace else 0.0
    # Medians: the on-phases during the load's start-up (CUDA initialisation) sit at the off level.
    on = [p for t, p in trace if _in(t, windows, SETTLE_S)]
    off = [p for t, p in trace if _in(t, _off_windows(windows, end), SETTLE_S)]
    on_w = statistics.median(on) if on else None
    off_w = statistics.median(off) if off else None
    out.update(pulses_commanded=len(windows), on_power_w=on_w, off_power_w=off_w, edges_rising=0, edges_falling=0,
               rise_lag_s=None)
    if on_w is None or off_w is None or not tdp or on_w - off_w < MIN_SWING_OF_TDP * tdp:
        out["edges_reason"] = "no on/off swing of at least %g x TDP in the trace" % MIN_SWING_OF_TDP
        return out
    rising, falling, rise_times = edges(trace, off_w, on_w)
    lags = [min((t - a for t in rise_times if t >= a), default=None) for a, _b in windows]
    lags = [lag for lag in lags if lag is not None and lag < (windows[0][1] - windows[0][0])]
    out.update(edges_rising=rising, edges_falling=falling,
               rise_lag_s=round(statistics.median(lags), 2) if lags else None)
    return out


def plot(traces, path):
    """Power (W, TDP dashed), temperature (°C) and SM clock (MHz) over time of each ``traces[name]``
    (``{samples, on_windows, tdp_w, title}``); returns the plot's ``{status, reason, file}``."""
    if pyplot is None:
        return {"status": "not_run", "reason": "matplotlib is not importable: %s" % PLOT_ERROR, "file": None}
    if not traces:
        return {"status": "not_run", "reason": "no power test kept telemetry", "file": None}
    fig, axes = pyplot.subplots(3, len(traces), figsize=(7 * len(traces), 8), sharex="col", squeeze=False)
    for col, (name, part) in enumerate(traces.items()):
        t = [s["t_s"] for s in part["samples"]]
        for row, (key, label) in enumerate((("power_w", "power (W)"), ("temp_c", "GPU temp (°C)"),
                                            ("sm_clock_mhz", "SM clock (MHz)"))):
            ax = axes[row][col]
            ax.plot(t, [s[key] for s in part["samples"]], lw=0.8)
            ax.set_ylabel(label)
            for a, b in part["on_windows"]:
                ax.axvspan(a, b, color="orange", alpha=0.15, lw=0)
        if part["tdp_w"]:
            axes[0][col].axhline(part["tdp_w"], ls="--", color="red", lw=0.8, label="TDP %g W" % part["tdp_w"])
            axes[0][col].legend(loc="lower right")
        axes[0][col].set_title("%s: %s" % (name, part["title"]))
        axes[2][col].set_xlabel("time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    pyplot.close(fig)
    return {"status": "ran", "reason": "", "file": "power.png"}
