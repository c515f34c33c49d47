"""Labels and names of the Docker objects of a sandbox."""

from __future__ import annotations

from sandbox.containers.labels import (
    container_name,
    instance_filter,
    network_name,
    sandbox_labels,
    shared_labels,
    volume_name,
)
from sandbox.settings import LABEL


def test_extra_labels_never_override_the_reapers_labels() -> None:
    labels = sandbox_labels(
        "abc", "inst", extra={LABEL: "forged", "kiln.instance": "other", "team": "a"}
    )
    assert labels[LABEL] == "abc"
    assert labels["kiln.instance"] == "inst"
    assert labels["team"] == "a"


def test_shared_objects_are_labelled_shared_for_their_instance() -> None:
    assert shared_labels("inst") == {LABEL: "shared", "kiln.instance": "inst"}


def test_the_instance_filter_selects_kiln_objects_of_one_instance() -> None:
    assert instance_filter("inst") == {"label": [LABEL, "kiln.instance=inst"]}


def test_names_derive_from_the_sandbox_id() -> None:
    names = (container_name("abc"), network_name("abc"), volume_name("abc"))
    assert names == ("kiln-sb-abc", "kiln-net-abc", "kiln-ws-abc")
