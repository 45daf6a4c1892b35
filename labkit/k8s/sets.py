"""The generated files under `clusters/`: each chapter's manifests and Volcano's two scheduler ConfigMaps.

`python -m labkit.k8s.sets` rewrites them; `tests/test_k8s_sets.py` fails when they are stale.
Chapters with a real-cluster section export their preset (or their example scenario) at a time scale that
fits a laptop run.
"""

from __future__ import annotations

from pathlib import Path

from .. import spec
from .export import dump, header, render, write
from .manifests import lab_labels, manifests, scheduler_configmap

CHAPTERS = {
    "ch01": ("case-study", 1008.0),   # the case study's week in 10 minutes
    "ch02": ("fragmentation", 60.0),  # 8-hour jobs in 8 minutes
    "ch08": ("preemption-checkpoint", 60.0),  # 10 hours of work, four preemptions, in about 15 minutes
}
"""clusters/<chapter> -> (preset, time scale)."""
EXAMPLES = {
    "ch06": ("queue-order.yaml", 20.0),  # ch. 6: 2.7 hours in 8 minutes
    "ch07": ("priority-stream.yaml", 60.0),  # ch. 7: 12 hours of the prod stream in 12 minutes
}
"""clusters/<chapter> -> (scenario file in labkit/examples, time scale), for chapters whose scenario is an example."""
SCHEDULER_POLICIES = {"shipped": "volcano-shipped", "multitenant": "volcano-multitenant"}
"""clusters/volcano/scheduler-<name>.yaml -> policy preset."""
REGENERATE = "python -m labkit.k8s.sets"
CLUSTERS = Path(__file__).resolve().parents[2] / "clusters"
EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"


def generated() -> dict[str, dict[str, str]]:
    """folder under clusters/ -> {file name: text}, for every generated set."""
    out = {}
    for chapter, (preset, scale) in CHAPTERS.items():
        command = f"labkit export k8s --preset {preset} --time-scale {scale:g}"
        out[chapter] = render(manifests(spec.preset(preset), scale), command)
    for chapter, (name, scale) in EXAMPLES.items():
        command = f"labkit export k8s examples/{name} --time-scale {scale:g}"
        out[chapter] = render(manifests(spec.load(EXAMPLES_DIR / name), scale), command)
    out["volcano"] = {}
    for name, policy in SCHEDULER_POLICIES.items():
        obj = scheduler_configmap(spec.policy(policy), lab_labels(policy))
        out["volcano"][f"scheduler-{name}.yaml"] = header(REGENERATE) + dump([obj])
    return out


def main() -> None:
    for folder, files in generated().items():
        written = write(files, CLUSTERS / folder)
        print(f"{CLUSTERS / folder}: {len(written)} files")


if __name__ == "__main__":
    main()
