"""The model configuration as a model sees it: lookups, and the object `auto_complete_config`
receives and returns. Its error messages are Triton's, word for word."""

from __future__ import annotations

import json
from typing import Any


def get_input_config_by_name(model_config: dict, name: str) -> dict | None:
    return _by_name(model_config.get("input", []), name)


def get_output_config_by_name(model_config: dict, name: str) -> dict | None:
    return _by_name(model_config.get("output", []), name)


def _by_name(items: list[dict], name: str) -> dict | None:
    for item in items:
        if item.get("name") == name:
            return item
    return None


def using_decoupled_model_transaction_policy(model_config: dict) -> bool:
    policy = model_config.get("model_transaction_policy")
    return bool(policy.get("decoupled", False)) if policy else False


class ModelConfig:
    """Only max_batch_size, the scheduler, inputs, outputs and the transaction policy may change."""

    def __init__(self, model_config: str | dict) -> None:
        config = json.loads(model_config) if isinstance(model_config, str) else model_config
        config.setdefault("input", [])
        config.setdefault("output", [])
        config.setdefault("max_batch_size", 0)
        self._model_config = config

    def as_dict(self) -> dict:
        return self._model_config

    @property
    def _name(self) -> str:
        return self._model_config.get("name", "")

    def set_max_batch_size(self, max_batch_size: int) -> None:
        configured = self._model_config["max_batch_size"]
        if configured > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {configured}, but in auto-complete-config "
                f"function for model '{self._name}' specified max_batch_size {max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for scheduler in ("sequence_batching", "ensemble_scheduling"):
            if scheduler in self._model_config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{scheduler}', but "
                    f"auto-complete-config function for model '{self._name}' tries to set "
                    "scheduling_choice as 'dynamic_batching'"
                )
        self._model_config.setdefault("dynamic_batching", {})

    def add_input(self, input: dict) -> None:  # noqa: A002 - Triton's parameter name
        self._add("input", input, ("name", "data_type", "dims", "optional"),
                  "'name', 'data_type', 'dims' and 'optional'")

    def add_output(self, output: dict) -> None:
        self._add("output", output, ("name", "data_type", "dims"), "'name', 'data_type' and 'dims'")

    def _add(self, kind: str, tensor: dict, allowed: tuple[str, ...], allowed_text: str) -> None:
        model = self._name
        for key in tensor:
            if key not in allowed:
                raise ValueError(
                    f"{kind} '{tensor['name']}' in auto-complete-config function for model '{model}' "
                    f"contains property other than {allowed_text}."
                )
        if "name" not in tensor:
            raise ValueError(f"{kind} in auto-complete-config function for model '{model}' is missing 'name' property.")
        for required in ("data_type", "dims"):
            if required not in tensor:
                raise ValueError(
                    f"{kind} '{tensor['name']}' in auto-complete-config function for model '{model}' "
                    f"is missing '{required}' property."
                )
        for current in self._model_config[kind]:
            if current["name"] != tensor["name"]:
                continue
            _check_same(model, kind, current, tensor)
            current["data_type"] = tensor["data_type"]
            current["dims"] = tensor["dims"]
            if "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        self._model_config[kind].append(tensor)

    def set_model_transaction_policy(self, transaction_policy_dict: dict) -> None:
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(
                    "model transaction property in auto-complete-config function for model "
                    f"'{self._name}' contains property other than 'decoupled'."
                )
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != wanted:
                raise ValueError(
                    "trying to change decoupled property in auto-complete-config for model "
                    f"'{self._name}', which is already set to '{policy['decoupled']}'."
                )
            policy["decoupled"] = wanted


def _check_same(model: str, kind: str, current: dict[str, Any], wanted: dict[str, Any]) -> None:
    name = wanted["name"]
    configured_type = current.get("data_type", "TYPE_INVALID")
    if configured_type != "TYPE_INVALID" and configured_type != wanted["data_type"]:
        raise ValueError(
            f"unable to load model '{model}', configuration expects datatype {configured_type} "
            f"for {kind} '{name}', model provides {wanted['data_type']}"
        )
    if current.get("dims") and current["dims"] != wanted["dims"]:
        raise ValueError(
            f"model '{model}', tensor '{name}': the model expects dims {wanted['dims']} but the "
            f"model configuration specifies dims {current['dims']}"
        )
    if kind == "input" and "optional" in current and "optional" in wanted and current["optional"] != wanted["optional"]:
        raise ValueError(
            f"model '{model}', tensor '{name}': the model expects optional {wanted['optional']} but "
            f"the model configuration specifies optional {current['optional']}"
        )
