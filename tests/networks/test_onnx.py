"""ONNX export: the file follows ML-Agents' contract (names, order, dtypes, constants, opset 9, one file) and
computes the torch network's actions."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from mlagents_envs.base_env import ActionSpec, BehaviorSpec, DimensionProperty, ObservationSpec, ObservationType

from ml_arl.core.actor_constants import MASK_LOGIT
from ml_arl.networks.actor_critic import ActorCritic
from ml_arl.networks.onnx_export import check_onnx, export_onnx
from ml_arl.settings import NetworkSettings

BATCH = 5


def _spec(shapes: list[tuple[int, ...]], actions: ActionSpec) -> BehaviorSpec:
    obs = [
        ObservationSpec(shape, (DimensionProperty.UNSPECIFIED,) * len(shape), ObservationType.DEFAULT, f"obs{i}")
        for i, shape in enumerate(shapes)
    ]
    return BehaviorSpec(obs, actions)


# name: (observation shapes, action spec, network settings)
CASES: dict[str, tuple[list[tuple[int, ...]], ActionSpec, dict[str, Any]]] = {
    "continuous": ([(8,)], ActionSpec(3, ()), {"normalize": True}),
    "discrete": ([(6,)], ActionSpec(0, (3, 2)), {}),
    "hybrid": ([(3,), (5,)], ActionSpec(2, (4,)), {"normalize": True}),
    "visual": ([(4,), (36, 36, 3)], ActionSpec(2, (3,)), {"normalize": True, "vis_encode_type": "simple"}),
    # rank-2 observations are flattened; a small image through the fully connected encoder
    "grid": ([(2, 3), (12, 12, 1)], ActionSpec(2, (2, 2)), {"normalize": True, "vis_encode_type": "fully_connected"}),
    # the other image encoders, on images that are not square (a height/width mix-up shows)
    "nature_cnn": ([(36, 41, 3)], ActionSpec(2, (3,)), {"vis_encode_type": "nature_cnn"}),
    "resnet": ([(3,), (17, 22, 3)], ActionSpec(1, (2, 2)), {"normalize": True, "vis_encode_type": "resnet"}),
    "match3": ([(5, 7, 5)], ActionSpec(0, (4,)), {"vis_encode_type": "match3"}),
}


class Exported(NamedTuple):
    net: ActorCritic
    path: Path
    before: dict[str, torch.Tensor]


def _build(case: str, seed: int = 0) -> ActorCritic:
    shapes, actions, settings = CASES[case]
    torch.manual_seed(seed)
    net = ActorCritic(_spec(shapes, actions), NetworkSettings(hidden_units=32, **settings))
    with torch.no_grad():
        # random weights everywhere (init leaves zero biases and tiny heads), and a mean that hits the clamp;
        # image encoders keep the scale of their init (added noise would grow through their layers and
        # saturate every action)
        encoders = {id(p) for p in net.encoder.encoders.parameters()}
        for p in net.parameters():
            if id(p) in encoders:
                p.mul_(1.0 + 0.3 * torch.randn_like(p))
                p.add_(0.05 * torch.randn_like(p) if p.dim() == 1 else 0.0)
            else:
                p.add_(torch.randn_like(p) * 0.3)
        if net.mu is not None:
            net.mu.bias[0] = 4.0
    if net.normalize:
        for _ in range(3):
            net.normalizer.update(torch.randn(32, net.normalizer.mean.shape[0]) * 3.0 + 2.0)
    return net


def _state(net: ActorCritic) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


@pytest.fixture(scope="module", params=list(CASES))
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Exported:
    net = _build(request.param)
    before = _state(net)
    path = tmp_path_factory.mktemp(request.param) / "policy.onnx"
    export_onnx(net, str(path))
    return Exported(net, path, before)


def _inputs(net: ActorCritic, seed: int) -> tuple[list[np.ndarray], dict[str, np.ndarray], np.ndarray]:
    """Random observations as the env gives them (images NHWC), the ONNX feed (NCHW) and allowed masks."""
    rng = np.random.default_rng(seed)
    obs = [
        (rng.random((BATCH, *o.shape)) if len(o.shape) == 3 else rng.normal(size=(BATCH, *o.shape)) * 3 + 1).astype(
            np.float32
        )
        for o in net.spec.observation_specs
    ]  # images in [0, 1], as cameras give them
    feed = {f"obs_{i}": np.ascontiguousarray(o.transpose(0, 3, 1, 2)) if o.ndim == 4 else o for i, o in enumerate(obs)}
    allowed = rng.random((BATCH, sum(net.branches))) > 0.4
    start = 0
    for size in net.branches:  # at least one allowed action per branch and row
        dead = ~allowed[:, start : start + size].any(axis=1)
        allowed[dead, start + rng.integers(size)] = True
        start += size
    if net.branches:
        feed["action_masks"] = allowed.astype(np.float32)
    return obs, feed, allowed


def _session(path: Path) -> Any:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_valid_single_file_at_opset_9(exported: Exported) -> None:
    model = onnx.load(str(exported.path))
    onnx.checker.check_model(model, full_check=True)
    assert [(o.domain, o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")] == [("", 9)]
    assert os.listdir(exported.path.parent) == ["policy.onnx"]  # no external data, no temp file left
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in model.graph.initializer)
    check_onnx(str(exported.path))


def test_inputs(exported: Exported) -> None:
    net = exported.net
    session = _session(exported.path)
    names = [f"obs_{i}" for i in range(len(net.spec.observation_specs))]
    if net.branches:
        names.append("action_masks")
    assert [i.name for i in session.get_inputs()] == names
    assert all(i.type == "tensor(float)" for i in session.get_inputs())
    shapes = [i.shape for i in session.get_inputs()]
    for shape, spec in zip(shapes, net.spec.observation_specs):
        want = [spec.shape[2], spec.shape[0], spec.shape[1]] if len(spec.shape) == 3 else list(spec.shape)
        assert shape == ["batch", *want]
    if net.branches:
        assert shapes[-1] == ["batch", sum(net.branches)]


def test_outputs_and_constants(exported: Exported) -> None:
    net = exported.net
    session = _session(exported.path)
    names = ["version_number", "memory_size"]
    if net.n_cont:
        names += ["continuous_actions", "continuous_action_output_shape", "deterministic_continuous_actions"]
    if net.branches:
        names += ["discrete_actions", "discrete_action_output_shape", "deterministic_discrete_actions"]
    assert [o.name for o in session.get_outputs()] == names
    _, feed, _ = _inputs(net, seed=1)
    out = dict(zip(names, session.run(None, feed)))
    for name, value in out.items():
        assert value.dtype == (np.int64 if name in ("discrete_actions", "deterministic_discrete_actions") else np.float32)
    assert out["version_number"].tolist() == [3.0]
    assert out["memory_size"].tolist() == [0.0]
    if net.n_cont:
        assert out["continuous_action_output_shape"].tolist() == [float(net.n_cont)]
        assert out["continuous_actions"].shape == out["deterministic_continuous_actions"].shape == (BATCH, net.n_cont)
    if net.branches:
        assert out["discrete_action_output_shape"].tolist() == [[float(b) for b in net.branches]]
        shape = (BATCH, len(net.branches))
        assert out["discrete_actions"].shape == out["deterministic_discrete_actions"].shape == shape
    # the batch dimension is dynamic
    _, feed1, _ = _inputs(net, seed=2)
    small = session.run(None, {k: v[:1] for k, v in feed1.items()})
    assert all(v.shape[0] == 1 for n, v in zip(names, small) if n.endswith("actions"))


def test_actions_match_torch(exported: Exported) -> None:
    net = exported.net
    session = _session(exported.path)
    names = [o.name for o in session.get_outputs()]
    obs, feed, allowed = _inputs(net, seed=3)
    with torch.no_grad():
        hidden = net.body(net.encoder([torch.as_tensor(o) for o in obs]))  # images NHWC, as the env sends them
    runs = [dict(zip(names, session.run(None, feed))) for _ in range(20)]
    out = runs[0]
    if net.n_cont:
        assert net.mu is not None
        with torch.no_grad():
            want = (torch.clamp(net.mu(hidden), -3.0, 3.0) / 3.0).numpy()
        np.testing.assert_allclose(out["deterministic_continuous_actions"], want, atol=1e-5)
        assert np.any(np.abs(want) == 1.0) and np.any(np.abs(want) < 1.0)  # the clamp is exercised
        samples = np.stack([r["continuous_actions"] for r in runs])
        assert np.all(samples >= -1.0) and np.all(samples <= 1.0)
        assert np.unique(samples).size > 10  # really sampled
    if net.branches:
        assert net.logits is not None
        with torch.no_grad():
            logits = net.logits(hidden)
            masked = torch.where(torch.as_tensor(allowed), logits, torch.full_like(logits, MASK_LOGIT))
        start = 0
        samples = np.stack([r["discrete_actions"] for r in runs])  # [runs, batch, branches]
        for b, size in enumerate(net.branches):
            greedy = masked[:, start : start + size].argmax(dim=1).numpy()
            np.testing.assert_array_equal(out["deterministic_discrete_actions"][:, b], greedy)
            picked = samples[:, :, b]
            assert np.all((picked >= 0) & (picked < size))
            assert np.all(np.take_along_axis(allowed[:, start : start + size], picked.T, axis=1))  # never masked
            start += size
        assert np.unique(samples).size > 1


def test_export_leaves_network_untouched(exported: Exported) -> None:
    after = _state(exported.net)
    assert after.keys() == exported.before.keys()
    assert all(torch.equal(after[k], exported.before[k]) for k in after)
    assert all(p.requires_grad for p in exported.net.parameters())


def test_export_with_gradients_and_rng(tmp_path: Path) -> None:
    net = _build("hybrid", seed=1)
    obs, _, allowed = _inputs(net, seed=4)
    _, _, value = net.evaluate(
        [torch.as_tensor(o) for o in obs], torch.as_tensor(allowed), torch.zeros(BATCH, 2), torch.zeros(BATCH, 1)
    )
    value.sum().backward()
    grads = {n: p.grad.clone() for n, p in net.named_parameters() if p.grad is not None}
    assert grads
    state = _state(net)
    rng = torch.get_rng_state()
    export_onnx(net, str(tmp_path / "a.onnx"))
    export_onnx(net, str(tmp_path / "a.onnx"))  # replaces the file
    assert torch.equal(torch.get_rng_state(), rng)  # tracing's random draws do not move the trainer's stream
    assert all(torch.equal(v, state[k]) for k, v in _state(net).items())
    for n, p in net.named_parameters():
        assert p.requires_grad
        assert (p.grad is None) == (n not in grads)
        if p.grad is not None:
            assert torch.equal(p.grad, grads[n])
    assert sorted(os.listdir(tmp_path)) == ["a.onnx"]
    check_onnx(str(tmp_path / "a.onnx"))


def test_exports_from_two_threads(tmp_path: Path) -> None:
    nets = [_build("continuous", seed=2), _build("discrete", seed=3)]
    errors: list[BaseException] = []

    def export(i: int) -> None:
        try:
            for _ in range(3):
                export_onnx(nets[i], str(tmp_path / f"{i}.onnx"))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=export, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(2):
        check_onnx(str(tmp_path / f"{i}.onnx"))


def test_check_onnx_rejects_broken_models(exported: Exported, tmp_path: Path) -> None:
    good = onnx.load(str(exported.path))

    def rejected(model: onnx.ModelProto, match: str) -> None:
        path = tmp_path / "bad.onnx"
        onnx.save(model, str(path))
        with pytest.raises(ValueError, match=match) as err:
            check_onnx(str(path))
        assert "\n" not in str(err.value)

    bad = onnx.ModelProto()
    bad.CopyFrom(good)
    bad.opset_import[0].version = 11
    rejected(bad, "opset is 11|checker")  # opset-11 Clip/Slice differ: the checker sees it first

    bad = onnx.ModelProto()
    bad.CopyFrom(good)
    del bad.graph.output[-1]
    rejected(bad, "outputs are")

    bad = onnx.ModelProto()
    bad.CopyFrom(good)
    for node in bad.graph.node:
        renamed = ["memory" if o == "memory_size" else o for o in node.output]
        del node.output[:]
        node.output.extend(renamed)
    bad.graph.output[1].name = "memory"
    rejected(bad, "outputs are")

    bad = onnx.ModelProto()
    bad.CopyFrom(good)
    source = next(n.input[0] for n in bad.graph.node if n.output[0] == "version_number")
    init = next(t for t in bad.graph.initializer if t.name == source)
    init.CopyFrom(onnx.numpy_helper.from_array(np.array([4.0], np.float32), source))
    rejected(bad, r"version_number is not \[3.0\]")

    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a readable ONNX model"):
        check_onnx(str(tmp_path / "junk.onnx"))


@pytest.mark.parametrize("case", ["continuous", "hybrid"])
def test_sac_actor_exports_within_the_contract(case: str, tmp_path: Path) -> None:
    """SAC's actor (log sigma from its own head, tanh-squashed actions) exports under the same
    contract; the deterministic action is tanh(mu) and samples spread as the state's sigma says."""
    shapes, actions, settings = CASES[case]
    torch.manual_seed(0)
    net = ActorCritic(_spec(shapes, actions), NetworkSettings(hidden_units=32, **settings),
                      conditional_sigma=True, tanh_squash=True)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.15)
    path = tmp_path / "sac.onnx"
    export_onnx(net, str(path))
    check_onnx(str(path))
    session = _session(path)
    names = [o.name for o in session.get_outputs()]
    obs, feed, _ = _inputs(net, seed=1)
    runs = [dict(zip(names, session.run(None, feed))) for _ in range(200)]
    with torch.no_grad():
        dist = net.distribution([torch.as_tensor(o) for o in obs], None)
        assert dist.mu is not None and dist.std is not None
        mu, std = dist.mu.numpy(), dist.std.numpy()
    np.testing.assert_allclose(runs[0]["deterministic_continuous_actions"], np.tanh(mu), atol=1e-5)
    samples = np.stack([r["continuous_actions"] for r in runs])
    assert np.all(np.abs(samples) <= 1.0 + 1e-6)  # onnxruntime's tanh may round a hair past 1
    # entries whose samples never saturate float32's tanh, with a sigma float32 can resolve after it
    inside = (np.abs(samples).max(axis=0) < 0.999) & (std > 1e-2)
    assert inside.sum() >= 2
    raw_std = np.arctanh(samples).std(axis=0)
    np.testing.assert_allclose(raw_std[inside], std[inside], rtol=0.25)  # the state-dependent sigma


# the ops of ML-Agents' own exports (PPO, discrete, simple encoder), plus MaxPool and Relu, which its
# resnet encoder adds, and Flatten for our rank-2 observations; every one is in ONNX opset 9 and in
# Unity's importer
ML_AGENTS_OPS = {
    "Add", "ArgMax", "Clip", "Concat", "Constant", "Conv", "Div", "Exp", "Flatten", "Gemm", "Identity", "LeakyRelu", "Log",
    "MaxPool", "Mul", "Multinomial", "RandomNormalLike", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax", "Sub",
}


@pytest.mark.parametrize("case", ["visual", "grid", "nature_cnn", "resnet", "match3"])
def test_image_encoders_export_with_opset_9_ops(case: str) -> None:
    """Each encoder's graph keeps to ML-Agents' ops: its convolutions carry their padding as an
    attribute (no Pad node), resnet's max-pools are 3x3 of stride 2 without padding, and its
    residual sums are plain Adds."""
    from ml_arl.networks.onnx_export import export_model

    model = export_model(_build(case))
    ops = [node.op_type for node in model.graph.node]
    assert set(ops) <= ML_AGENTS_OPS, set(ops) - ML_AGENTS_OPS
    attrs = [(node.op_type, {a.name: list(a.ints) for a in node.attribute}) for node in model.graph.node]
    convs = [a for op, a in attrs if op == "Conv"]
    pools = [a for op, a in attrs if op == "MaxPool"]
    vis_encode_type = CASES[case][2]["vis_encode_type"]
    if vis_encode_type == "resnet":
        assert len(convs) == 3 * (1 + 2 * 2) and all(c["pads"] == [1, 1, 1, 1] for c in convs)
        assert len(pools) == 3
        assert all(p["kernel_shape"] == [3, 3] and p["strides"] == [2, 2] and not any(p.get("pads", [])) for p in pools)
        assert ops.count("Add") >= 3 * 2  # a residual sum per block
    else:
        assert not pools
        assert len(convs) == {"simple": 2, "nature_cnn": 3, "match3": 2, "fully_connected": 0}[vis_encode_type]
        assert all(not any(c.get("pads", [])) for c in convs)
