"""What a load keeps of a loaded model, and how its instances change in place, as Triton does.

A version that is READY, whose folder and shared files did not change, and whose configuration
changed in `instance_group` or `version_policy` at most, is kept rather than loaded again
(ensembles always load again); the versions that did change load as before. When the kept
version's instance groups changed, its instances are matched by signature (kind, device and the
group's other settings; not the group's name or count): each wanted one that matches a running
one keeps it, new signatures are created and join the scheduler at once, and the running ones
left over get no more work and stop (finalize) once the batch they hold is done; under sequence
batching they keep their sequences until those end. The model stays READY and serving
throughout. A model with `model_warmup` whose instances would change loads again.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..._proto import model_config_pb2 as mc
from .. import config as configs
from ..backend import InstanceSpec, ModelInstance
from ..scheduling.base import Scheduler
from .entries import ModelEntry, State

if TYPE_CHECKING:
    from ..model import LoadedModel


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


async def update_instances(model: LoadedModel, config: mc.ModelConfig) -> None:
    """Give a loaded model the instances the normalized `config` asks for (see the module
    docstring); nothing else of `config` is taken."""
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
    created = [result for result in results if not isinstance(result, BaseException)]
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


async def keep_versions(
    entry: ModelEntry, config: mc.ModelConfig, versions: list[int], stamps: dict[str, str]
) -> dict[int, LoadedModel]:
    """The READY versions a load keeps, as Triton keeps them: those whose files did not change
    and whose configuration changed in `instance_group` or `version_policy` at most; their
    instances change in place. Ensembles, and models whose instances cannot change under them
    when they would have to, load again."""
    if entry.polled is None or entry.stamps.get("") != stamps.get(""):
        return {}  # files every version shares changed
    kept: dict[int, LoadedModel] = {}
    for version in versions:
        record = entry.versions.get(version)
        model = record.model if record is not None and record.state is State.READY else None
        if model is None or model.ctx.backend_name == "ensemble" or entry.stamps.get(str(version)) != stamps.get(str(version)):
            continue
        wanted = _normalized(config, model)
        if not (_same_but_instances(entry.polled, config) or _same_but_instances(model.config, wanted)):
            continue
        if list(wanted.instance_group) != list(model.config.instance_group):
            if not updatable(model):
                continue
            await update_instances(model, wanted)
        model.config.version_policy.CopyFrom(wanted.version_policy)
        kept[version] = model
    return kept


def _same_but_instances(before: mc.ModelConfig, after: mc.ModelConfig) -> bool:
    """Triton's test for a change that needs no reload: `instance_group` and `version_policy` aside, equal."""
    a, b = mc.ModelConfig(), mc.ModelConfig()
    a.CopyFrom(before)
    b.CopyFrom(after)
    for config in (a, b):
        del config.instance_group[:]
        config.ClearField("version_policy")
    return a == b


def _normalized(config: mc.ModelConfig, model: LoadedModel) -> mc.ModelConfig:
    """`config` with the defaults a load fills in, to compare with a loaded model's (a client
    that loads the configuration it read back, one count changed)."""
    copy = mc.ModelConfig()
    copy.CopyFrom(config)
    configs.normalize(copy, model.name, model.ctx.backend_name)
    return copy
