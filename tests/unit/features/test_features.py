"""The feature list: how it is read, and what it refuses."""

from __future__ import annotations

import argparse
import logging

import pytest

from openinfer import features
from openinfer.features import Feature
from openinfer.features.flags import FlagGroups, GROUP_ORDER

#: Module-level features the tests below name by "module:attribute".
FIRST = Feature(name="first", extensions=("first",), backends={"one": "somewhere:One"})
TWIN = Feature(name="first")
OTHER = Feature(name="other", backends={"one": "elsewhere:One"})
NOT_A_FEATURE = object()
HERE = __name__


def test_the_list_is_read_in_order_and_the_names_follow_it():
    loaded = features.load([f"{HERE}:FIRST", f"{HERE}:OTHER"])
    assert [f.name for f in loaded] == ["first", "other"]
    assert features.extension_names(loaded) == ["first"]


def test_a_feature_whose_module_is_missing_is_skipped_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="openinfer.features"):
        loaded = features.load(["openinfer_no_such_module:FEATURE", f"{HERE}:FIRST"])
    assert [f.name for f in loaded] == ["first"]
    assert "openinfer_no_such_module:FEATURE unavailable" in caplog.text


@pytest.mark.parametrize("refs, error", [
    ([f"{HERE}:FIRST", f"{HERE}:TWIN"], "two features share a name: ['first', 'first']"),
    ([f"{HERE}:NOT_A_FEATURE"], "is not a Feature"),
])
def test_a_broken_list_is_refused(refs, error):
    with pytest.raises((ValueError, TypeError), match=error.replace("[", r"\[").replace("]", r"\]")):
        features.load(refs)


def test_two_features_may_not_provide_the_same_backend():
    with pytest.raises(ValueError, match="backend 'one' is provided twice"):
        features.backend_table([FIRST, OTHER])


def test_every_shipped_backend_is_one_feature_line():
    table = features.backend_table(features.load())
    assert set(table) == {"python", "onnxruntime", "pytorch", "ensemble", "transformers", "vllm"}


def test_flag_groups_keep_tritonservers_order_and_the_deprecated_flags_last():
    parser = argparse.ArgumentParser()
    groups = FlagGroups(parser)
    groups["Deprecated"].add_argument("--old", help="use --new")
    groups["Extra"].add_argument("--new", help="a feature's own group")
    groups["Logging"].add_argument("--log-thing", help="joins a known group")
    groups.finish()
    titles = [group.title for group in parser._action_groups[2:]]  # after argparse's own two
    assert titles == [*GROUP_ORDER, "Extra", "Deprecated"]
    assert parser.parse_args(["--old", "1", "--new", "2"]).old == "1"


def test_a_contribution_may_provide_only_the_cores_services_and_each_once(tmp_path):
    from openinfer.app.cli import serve_parser
    from openinfer.app.compose import compose
    from openinfer.app.settings import Settings
    from openinfer.features import Contribution

    settings = Settings.from_args(serve_parser().parse_args(["--model-repository", str(tmp_path)]))
    unknown = Feature(name="unknown", configure=lambda s: Contribution(services={"telemetry": object()}))
    twice = Feature(name="twice", configure=lambda s: Contribution(services={"cache": None}))
    with pytest.raises(ValueError, match="'unknown' provides 'telemetry', which is not a service of the core"):
        compose(settings, features=[unknown])
    with pytest.raises(ValueError, match="'twice' provides 'cache', which is provided already"):
        compose(settings, features=[twice])
