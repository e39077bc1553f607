"""The frontend-neutral core: requests, models, scheduling, statistics, repository."""
