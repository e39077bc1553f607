"""A loaded model's instances changed in place, as Triton changes them when a new configuration
differs from the loaded one in `instance_group` alone (and the model's files are unchanged).

Instances are matched by signature (kind, device and the group's other settings; not the
group's name or count): each new one that matches a running one keeps it, new signatures are
created and added to the instance pool, and the running instances left over are taken out of
the pool and stopped (finalized) once the work they hold is done. The model stays READY and
keeps serving throughout; requests only ever see instances that are running. Any other
change, a model with sequence batching or warm-up, or a version set that changes reloads as
before.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .._proto import model_config_pb2 as mc
from . import config as configs
from .backend import InstanceSpec, ModelInstance
from .scheduling.base import Scheduler

if TYPE_CHECKING:
    from .model import LoadedModel
    from .model_entries import ModelEntry


def instance_specs(config: mc.ModelConfig, name: str) -> list[InstanceSpec]:
    """One spec per instance the (normalized) configuration asks for."""
    specs = []
    for group in config.instance_group:
        devices = list(group.gpus) if group.kind == mc.ModelInstanceGroup.KIND_GPU else [0]
        for device in devices or [0]:
            for i in range(group.count):
                specs.append(InstanceSpec(f"{group.name}_{i}", group.kind, device, group))
    if not specs:  # ensembles have no instance group; one instance runs their steps
        specs.append(InstanceSpec(f"{name}_0", mc.ModelInstanceGroup.KIND_CPU, 0, mc.ModelInstanceGroup()))
    return specs


def only_instances_differ(before: mc.ModelConfig, after: mc.ModelConfig) -> bool:
    """The two configurations differ in `instance_group` or not at all."""
    a, b = mc.ModelConfig(), mc.ModelConfig()
    a.CopyFrom(before)
    b.CopyFrom(after)
    del a.instance_group[:]
    del b.instance_group[:]
    return a == b


def updatable(model: LoadedModel) -> bool:
    """Whether this model's instances can change under it: its scheduler allows it, no warm-up."""
    scheduler = model.scheduler
    return isinstance(scheduler, Scheduler) and scheduler.can_change_instances() and not model.config.model_warmup


def _signature(spec: InstanceSpec) -> tuple[int, int, bytes]:
    group = mc.ModelInstanceGroup()
    group.CopyFrom(spec.group)
    group.ClearField("name")
    group.ClearField("count")
    group.ClearField("gpus")
    return spec.kind, spec.device_id, group.SerializeToString(deterministic=True)


async def update_instances(model: LoadedModel, groups: list[mc.ModelInstanceGroup]) -> None:
    """Give a loaded model the instances `groups` ask for (see the module docstring)."""
    config = mc.ModelConfig()
    config.CopyFrom(model.config)
    del config.instance_group[:]
    config.instance_group.extend(groups)
    configs.normalize(config, model.name, model.ctx.backend_name)
    configs.validate(config)
    wanted = instance_specs(config, model.name)
    running = list(zip(model.instance_specs, model.instances))
    kept, added = [], []
    for spec in wanted:
        match = next((pair for pair in running if _signature(pair[0]) == _signature(spec)), None)
        if match is not None:
            running.remove(match)
            kept.append(match)
        else:
            added.append(spec)
    results = await asyncio.gather(
        *(model.backend.create_instance(model.ctx, spec) for spec in added), return_exceptions=True
    )
    failures = [result for result in results if isinstance(result, BaseException)]
    if failures:  # none of the new ones joins; the model keeps what it had
        for result in results:
            if not isinstance(result, BaseException):
                await result.stop()
        raise failures[0]
    created = list(results)
    scheduler: Scheduler = model.scheduler  # type: ignore[assignment]
    for instance in created:
        scheduler.add_instance(instance)
    model.instance_specs = [spec for spec, _ in kept] + added
    model.instances = [instance for _, instance in kept] + created
    del model.config.instance_group[:]
    model.config.instance_group.extend(config.instance_group)
    leaving = [asyncio.ensure_future(_retire(scheduler, instance)) for _, instance in running]
    for task in leaving:  # an unload waits for them too
        model.retiring.add(task)
        task.add_done_callback(model.retiring.discard)
    if not model.config.HasField("sequence_batching"):  # what they hold is a batch: wait for it
        await asyncio.gather(*leaving)  # (a sequence may run for long: its instance goes when it ends)


async def _retire(scheduler: Scheduler, instance: ModelInstance) -> None:
    """Left over: it finishes what it holds, then stops (its model's `finalize`)."""
    await scheduler.retire_instance(instance)
    await instance.stop()


async def try_in_place(entry: ModelEntry, config: mc.ModelConfig, versions: list[int], files: str) -> bool:
    """Change every loaded version's instances in place, when the new configuration (as polled)
    changes nothing else and the same versions stay (a configuration written again unchanged
    changes nothing); False when the load must reload."""
    ready = entry.ready_versions()
    if not ready or ready != sorted(versions) or entry.polled is None or entry.files != files:
        return False
    models = [entry.versions[v].model for v in ready]
    if not all(model is not None and updatable(model) for model in models):
        return False
    if not only_instances_differ(entry.polled, config) and not all(
        only_instances_differ(model.config, _normalized(config, model)) for model in models  # type: ignore[union-attr]
    ):
        return False
    for model in models:
        if _instances_changed(model, config):  # type: ignore[arg-type]
            await update_instances(model, list(config.instance_group))  # type: ignore[arg-type]
    return True


def _instances_changed(model: LoadedModel, config: mc.ModelConfig) -> bool:
    return list(_normalized(config, model).instance_group) != list(model.config.instance_group)


def _normalized(config: mc.ModelConfig, model: LoadedModel) -> mc.ModelConfig:
    """`config` with the defaults a load fills in, to compare with a loaded model's (a client
    that loads the configuration it read back, one count changed)."""
    copy = mc.ModelConfig()
    copy.CopyFrom(config)
    configs.normalize(copy, model.name, model.ctx.backend_name)
    return copy
