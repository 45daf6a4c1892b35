"""A real Slurm on 127.0.0.1 to check the simulator against (Debian's slurm-wlm 22.05, fake GPUs).

    from labkit.slurm import Cluster, slurm_scenario, up, run, down
    scenario, conf = slurm_scenario(labkit.load("examples/slurm-backfill.yaml"))
    cluster = Cluster(".labkit/slurm")
    up(scenario, conf, cluster)                 # munged, slurmctld, one slurmd per node
    result = run(scenario, conf, cluster)       # the real run as a labkit Result
    down(cluster)                               # stops exactly the daemons up started

`conf` writes slurm.conf, gres.conf and the sbatch scripts; `cluster` starts and stops the daemons;
`run` submits, applies the node events (`nodes`: scontrol update) and records; `parse` reads
scontrol/sinfo/squeue output.
"""

from .cluster import Cluster, down, missing_programs, up
from .conf import export, render, slurm_scenario
from .observe import Recorder, run

__all__ = ["Cluster", "Recorder", "down", "export", "missing_programs", "render", "run", "slurm_scenario", "up"]
