"""The course pipeline: chapter sources in `solutions/`, generated student labs in `labs/`.

    from labkit.course import cases, steps
    scenario = cases.case_study(nodes=8, hours=12)     # a slice of the running case (week=True: all of it)
    steps.placement(cases.fragmentation_snapshot())    # filter -> score -> bind, node by node
"""
