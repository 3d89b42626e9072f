"""--launcher slurm: tests as Slurm jobs (plan.py), their job scripts (jobs.py), job records (record.py)."""
