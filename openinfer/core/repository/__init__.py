"""Models on disk and their lifecycle: scanning, version policy, loading, reloading, unloading.

`repository.py` holds the model table and the control modes; `model_dir.py` what is read from one
model's folder; `version_loader.py` turns a version into a READY model; `instance_update.py`
changes a loaded model's instances in place; `load_requests.py` holds the load API's rules;
`namespaces.py` serves several repositories as namespaces; `storage/` mirrors remote ones.
"""
