"""Run ``ratio-spark train`` on a Spark cluster's GPUs (or a laptop's cores) with PySpark's TorchDistributor.

TorchDistributor starts ``num_processes`` training processes with torchrun: on the driver
(``local_mode: true``) or in a barrier stage on the executors (``local_mode: false``; Databricks, EMR with
GPUs, ``spark.task.resource.gpu.amount`` = 1). Each process runs the same ``ratio-spark train`` with the
resolved configuration, written next to the runs as YAML with the launcher set to ``none``; the
sentence-transformers trainer then finds torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR) and trains
data-parallel, gathering in-batch negatives across processes. The configuration's paths must be readable by
every process (a shared mount on a cluster).

pyspark is imported here only, inside the function: the training package is the plain-Python half.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Callable


def run_on_torch_distributor(config, settings, train_process: Callable[[str], int]) -> int:
    """Train with ``settings`` (the resolved ``training:`` section) on TorchDistributor; the exit code of rank 0.
    ``train_process(conf_path)`` is one training process (the command line's ``ratio-spark train``, given by
    the caller so that this package never imports the command line); TorchDistributor pickles it by reference
    and runs it in each of its processes."""
    from pyspark.ml.torch.distributor import TorchDistributor
    from pyspark.sql import SparkSession

    launch = settings.model_copy(update={"distributed": settings.distributed.model_copy(update={"launcher": "none"})})
    resolved = config.model_copy(update={"training": launch})
    folder = Path(settings.output)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", prefix=".train-launch-", dir=folder, delete=False) as handle:
        handle.write(resolved.to_yaml())
        conf_path = str(Path(handle.name).resolve())
    active = SparkSession.getActiveSession()
    spark = active or SparkSession.builder.master(config.spark.master or "local[2]").appName("ratio-spark-train").getOrCreate()
    try:
        options = settings.distributed
        distributor = TorchDistributor(num_processes=options.num_processes, local_mode=options.local_mode,
                                       use_gpu=options.use_gpu)
        print(f"train: TorchDistributor, {options.num_processes} process(es), local_mode={options.local_mode}, "
              f"use_gpu={options.use_gpu}, configuration {conf_path}", flush=True)
        code = distributor.run(train_process, conf_path)
    finally:
        if active is None:
            spark.stop()
        Path(conf_path).unlink(missing_ok=True)
    return int(code or 0)
