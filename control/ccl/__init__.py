"""CCL information collection: job descriptions, CCL debug-log parsing, and the demand they give."""

from icefabric.control.ccl.demand import Demand, Flow, demand_from_job, demand_from_jobs
from icefabric.control.ccl.job import JobError, JobSpec, Phase, Rank, load_job, parse_job
from icefabric.control.ccl.nccl_log import NcclLog, load_nccl_log, parse_nccl_log, to_job

__all__ = [
    "Demand",
    "Flow",
    "JobError",
    "JobSpec",
    "NcclLog",
    "Phase",
    "Rank",
    "demand_from_job",
    "demand_from_jobs",
    "load_job",
    "load_nccl_log",
    "parse_job",
    "parse_nccl_log",
    "to_job",
]
