"""Export the actor as an ONNX model that the Unity ML-Agents package (com.unity.ml-agents) can run.

Unity's loader (``SentisModelInfo`` / ``SentisModelParamLoader``) does not know which trainer
made a model; it relies only on names, dtypes and a few constant outputs, so the file must
follow ML-Agents' export contract exactly:

* opset 9, one self-contained file (no external weight files: Unity imports only the ``.onnx``);
* inputs ``obs_0``.. ``obs_{n-1}`` (float32, ``[batch, *shape]``, images channels-first
  ``[batch, C, H, W]`` because Unity feeds NCHW, a variable-length observation
  ``[batch, max_entities, entity_size]`` with its padding rows masked inside the graph) and, only with discrete branches,
  ``action_masks`` (float32 ``[batch, sum(branches)]``, 1 = allowed, 0 = masked), and only with
  network_settings.memory ``recurrent_in`` (float32 ``[batch, 1, memory_size]``: the LSTM's h
  then c, zeros at an episode's start);
* outputs, in this order: ``version_number`` ([3.0]; Unity accepts 2..3), ``memory_size``
  ([memory_size], [0.0] without memory), then for continuous actions ``continuous_actions`` (a
  sample, clamped to [-3, 3] and divided by 3, as the workers act),
  ``continuous_action_output_shape`` ([n_cont]) and ``deterministic_continuous_actions``
  (a SAC actor: tanh of the sample and of the mean, its log sigma from its own head),
  then for discrete actions ``discrete_actions`` (int64 sample per branch of the masked
  softmax), ``discrete_action_output_shape`` ([[size of each branch]]) and
  ``deterministic_discrete_actions`` (int64 argmax), and with memory ``recurrent_out``
  ([batch, 1, memory_size], the memory Unity feeds back at the agent's next decision; torch
  exports the LSTM as ONNX's LSTM op, which opset 9 has). Unity probes the constant outputs as
  float tensors, and checks the sizes against the agent's BehaviorParameters;
* the observation normalizer is baked in, since Unity feeds raw observations.

The export uses torch's TorchScript exporter (``dynamo=False``): the dynamo exporter needs
onnxscript, cannot go down to opset 9 and splits weights into a side file.
"""

from __future__ import annotations

import copy
import io
import threading
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn, Optional, TypeVar, cast

import numpy as np
import onnx
import torch
from onnx import TensorProto, numpy_helper
from torch import nn

from ml_arl.core.actor_constants import ACTION_CLAMP, LOG_SIGMA_MAX, LOG_SIGMA_MIN, MASK_LOGIT, NORM_CLIP
from ml_arl.core.atomic_files import atomic_write
from ml_arl.core.one_line import squeeze
from ml_arl.networks.actor_critic import ActorCritic

OPSET = 9
MODEL_EXPORT_VERSION = 3.0  # ML-Agents' ModelApiVersion.MLAgents2_0

RECURRENT_IN, RECURRENT_OUT = "recurrent_in", "recurrent_out"
CONTINUOUS_OUTPUTS = ("continuous_actions", "continuous_action_output_shape", "deterministic_continuous_actions")
DISCRETE_OUTPUTS = ("discrete_actions", "discrete_action_output_shape", "deterministic_discrete_actions")
_OUTPUT_TYPES = {
    "version_number": TensorProto.FLOAT,
    "memory_size": TensorProto.FLOAT,
    "continuous_actions": TensorProto.FLOAT,
    "continuous_action_output_shape": TensorProto.FLOAT,
    "deterministic_continuous_actions": TensorProto.FLOAT,
    "discrete_actions": TensorProto.INT64,
    "discrete_action_output_shape": TensorProto.FLOAT,
    "deterministic_discrete_actions": TensorProto.INT64,
    RECURRENT_OUT: TensorProto.FLOAT,
}

# The TorchScript exporter keeps global state (torch.onnx GLOBALS); one export at a time,
# whichever trainer thread asks.
_EXPORT_LOCK = threading.Lock()

M = TypeVar("M", bound=nn.Module)


def input_names(network: ActorCritic) -> list[str]:
    names = [f"obs_{i}" for i in range(len(network.spec.observation_specs))]
    names += ["action_masks"] if network.branches else []
    return names + [RECURRENT_IN] if network.memory_size else names


def output_names(network: ActorCritic) -> list[str]:
    names = ["version_number", "memory_size"]
    if network.n_cont:
        names += CONTINUOUS_OUTPUTS
    if network.branches:
        names += DISCRETE_OUTPUTS
    return names + [RECURRENT_OUT] if network.memory_size else names


def onnx_input_shape(shape: Sequence[int]) -> list[int]:
    """Observation shape in the model (without batch): images (H, W, C) become (C, H, W)."""
    if len(shape) == 3:
        h, w, c = shape
        return [int(c), int(h), int(w)]
    return [int(s) for s in shape]


def _frozen_copy(module: M) -> M:
    """A CPU float32 copy in eval mode, without gradients; the original is only read."""
    out = copy.deepcopy(module).to("cpu", torch.float32).eval()
    for p in out.parameters():
        p.grad = None
        p.requires_grad_(False)
    return out


class _ExportActor(nn.Module):
    """A frozen CPU copy of the actor with the graph ML-Agents exports: (obs..., [masks]) -> outputs."""

    norm_mean: torch.Tensor
    norm_std: torch.Tensor
    log_std: torch.Tensor
    version_number: torch.Tensor
    memory_size: torch.Tensor
    continuous_action_output_shape: torch.Tensor
    discrete_action_output_shape: torch.Tensor

    def __init__(self, network: ActorCritic):
        super().__init__()
        encoder = network.encoder
        self.n_obs = len(network.spec.observation_specs)
        self.vector = list(encoder.vector)
        self.visual = list(encoder.visual)
        self.normalize = bool(encoder.normalize) and bool(self.vector)
        self.encoders = _frozen_copy(encoder.encoders)
        self.entities = None if encoder.entities is None else _frozen_copy(encoder.entities)
        self.body = _frozen_copy(network.body)
        self.lstm = None if network.lstm is None else _frozen_copy(network.lstm)
        self.hidden_memory = network.memory_size // 2
        self.mu = None if network.mu is None else _frozen_copy(network.mu)
        self.log_sigma = None if network.log_sigma is None else _frozen_copy(network.log_sigma)
        self.tanh_squash = bool(network.tanh_squash)
        self.logits = None if network.logits is None else _frozen_copy(network.logits)
        self.branches = tuple(network.branches)
        self.n_cont = int(network.n_cont)
        # float32 copies of the normalizer's float64 statistics, computed as Normalizer.forward does
        # (so the graph holds float32 constants and no Cast)
        norm = network.normalizer
        self.register_buffer("norm_mean", norm.mean.detach().float().cpu().clone())
        self.register_buffer("norm_std", norm.std().detach().float().cpu().clone())
        self.register_buffer("log_std", network.log_std.detach().float().cpu().clone().reshape(1, -1))
        self.register_buffer("version_number", torch.tensor([MODEL_EXPORT_VERSION], dtype=torch.float32))
        self.register_buffer("memory_size", torch.tensor([float(network.memory_size)], dtype=torch.float32))
        self.register_buffer("continuous_action_output_shape", torch.tensor([float(self.n_cont)]))
        self.register_buffer("discrete_action_output_shape", torch.tensor([[float(b) for b in self.branches]]))

    def features(self, obs: Sequence[torch.Tensor]) -> torch.Tensor:
        """As ObservationEncoder.forward(obs, channels_first=True), with float32 normalizer constants."""
        feats: list[torch.Tensor] = []
        if self.vector:
            parts = [obs[i] if obs[i].dim() == 2 else torch.flatten(obs[i], 1) for i in self.vector]
            x = parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)
            if self.normalize:
                x = torch.clamp((x - self.norm_mean) / self.norm_std, -NORM_CLIP, NORM_CLIP)
            feats.append(x)
        for i, enc in zip(self.visual, self.encoders):
            feats.append(enc(obs[i]))  # the network's own encoder, fed channels-first as Unity does
        if self.entities is not None:  # [batch, max_entities, entity_size]; padding rows are masked in the graph
            own = (feats[0] if len(feats) == 1 else torch.cat(feats, dim=1)) if feats else None
            feats.append(self.entities(own, obs))
        return feats[0] if len(feats) == 1 else torch.cat(feats, dim=1)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        obs = inputs[: self.n_obs]
        hidden = self.body(self.features(obs))
        memory_out = None
        if self.lstm is not None:  # one step from recurrent_in [B, 1, 2H] (h then c), as ML-Agents' LSTM
            memory = inputs[-1].transpose(0, 1)  # [1, B, 2H]: torch's (layers, batch, hidden) state layout
            h0 = memory[:, :, : self.hidden_memory].contiguous()
            c0 = memory[:, :, self.hidden_memory :].contiguous()
            out, (h1, c1) = self.lstm(hidden.unsqueeze(1), (h0, c0))
            hidden = out.reshape(-1, self.hidden_memory)
            memory_out = torch.cat([h1, c1], dim=-1).transpose(0, 1)
        outputs: list[torch.Tensor] = [self.version_number, self.memory_size]
        if self.mu is not None:
            mu = self.mu(hidden)
            if self.log_sigma is not None:  # SAC: a state-dependent log sigma, clamped as in training
                std = torch.exp(torch.clamp(self.log_sigma(hidden), LOG_SIGMA_MIN, LOG_SIGMA_MAX))
            else:
                # mu * 0 + log_std broadcasts without Expand (older Sentis versions lack it), as ML-Agents does
                std = torch.exp(mu * 0.0 + self.log_std)
            sample = mu + torch.randn_like(mu) * std
            if self.tanh_squash:  # SAC's actions are tanh-squashed and sent as they are
                sent, greedy_sent = torch.tanh(sample), torch.tanh(mu)
            else:
                sent = torch.clamp(sample, -ACTION_CLAMP, ACTION_CLAMP) / ACTION_CLAMP
                greedy_sent = torch.clamp(mu, -ACTION_CLAMP, ACTION_CLAMP) / ACTION_CLAMP
            outputs += [sent, self.continuous_action_output_shape, greedy_sent]
        if self.logits is not None:
            masks = inputs[self.n_obs]
            # logits * mask - 1e8 * (1 - mask), with (1 - mask) as -1 * mask + 1 (ML-Agents: Sentis may swap a Sub)
            logits = self.logits(hidden) * masks - (-MASK_LOGIT) * (-1.0 * masks + 1.0)
            sampled: list[torch.Tensor] = []
            greedy: list[torch.Tensor] = []
            start = 0
            for size in self.branches:
                branch = logits[:, start : start + size]
                start += size
                sampled.append(torch.multinomial(torch.softmax(branch, dim=1), 1))
                greedy.append(torch.argmax(branch, dim=1, keepdim=True))
            outputs += [
                sampled[0] if len(sampled) == 1 else torch.cat(sampled, dim=1),
                self.discrete_action_output_shape,
                greedy[0] if len(greedy) == 1 else torch.cat(greedy, dim=1),
            ]
        if memory_out is not None:
            outputs.append(memory_out)
        return tuple(outputs)


def _dummy_inputs(network: ActorCritic) -> tuple[torch.Tensor, ...]:
    """Batch-1 inputs for tracing (ML-Agents' dummies: zero observations, all actions allowed)."""
    dummies = [torch.zeros([1] + onnx_input_shape(o.shape)) for o in network.spec.observation_specs]
    if network.branches:
        dummies.append(torch.ones(1, sum(network.branches)))
    if network.memory_size:
        dummies.append(torch.zeros(1, 1, network.memory_size))
    return tuple(dummies)


def _unshare_initializers(model: onnx.ModelProto) -> None:
    """The exporter merges parameters with equal values (e.g. two zero biases) into one initializer read through
    an Identity node; give each layer its own initializer again, so every Gemm/Conv takes constant weights."""
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    outputs = {o.name for o in graph.output}
    kept = []
    for node in graph.node:
        if node.op_type == "Identity" and node.input[0] in inits and node.output[0] not in outputs:
            tensor = TensorProto()
            tensor.CopyFrom(inits[node.input[0]])
            tensor.name = node.output[0]
            graph.initializer.append(tensor)
        else:
            kept.append(node)
    if len(kept) != len(graph.node):
        del graph.node[:]
        graph.node.extend(kept)


def export_model(network: ActorCritic) -> onnx.ModelProto:
    """The actor of ``network`` as an ONNX model (in memory), checked against the contract."""
    names_in, names_out = input_names(network), output_names(network)
    dynamic_axes = {name: {0: "batch"} for name in names_in}
    dynamic_axes.update(
        {name: {0: "batch"} for name in ("continuous_actions", "discrete_actions", RECURRENT_OUT) if name in names_out}
    )
    buf = io.BytesIO()
    with torch.no_grad():
        # a frozen CPU copy: the live network (maybe on CUDA, maybe training) is only read
        actor = _ExportActor(network).eval()
        # tracing draws from the global RNG (randn_like, multinomial): fork it so the trainer's stream is unchanged.
        # The exporter's state and the warning filters are process-global: one export at a time.
        with _EXPORT_LOCK, torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning)  # "legacy TorchScript-based ONNX export"
            warnings.filterwarnings("ignore", category=FutureWarning)
            warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
            warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.onnx")
            torch.onnx.export(
                actor,
                _dummy_inputs(network),
                cast(Any, buf),  # the TorchScript exporter writes to file objects too (annotated str | PathLike)
                dynamo=False,  # the dynamo exporter needs onnxscript, cannot reach opset 9 and writes side files
                opset_version=OPSET,
                input_names=names_in,
                output_names=names_out,
                dynamic_axes=dynamic_axes,
                export_params=True,
                do_constant_folding=True,
            )
    model = onnx.load_model_from_string(buf.getvalue())
    _unshare_initializers(model)
    _check_model(model)
    return model


def export_onnx(network: ActorCritic, path: str) -> None:
    """Write the actor of ``network`` to ``path`` as one self-contained ONNX file (opset 9) that Unity's
    ML-Agents package runs. ``network`` is not changed (it is copied to the CPU first); the file is
    replaced atomically, and only after the model passed ``check_onnx``'s checks."""
    data = export_model(network).SerializeToString()
    atomic_write(path, lambda f: f.write(data))


def check_onnx(path: str) -> None:
    """Raise ValueError (one line) unless ``path`` holds a valid, self-contained opset-9 model that follows the
    ML-Agents export contract (input and output names, order, dtypes, constant outputs)."""
    try:
        model = onnx.load(path, load_external_data=False)
    except Exception as e:
        raise ValueError(f"{path}: not a readable ONNX model ({squeeze(e, 300)})") from e
    _check_model(model, path)



def _const_value(graph: onnx.GraphProto, name: str) -> Optional[np.ndarray]:
    """The value of a constant graph output (an initializer or Constant, through Identity nodes), None if computed."""
    inits = {t.name: t for t in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    for _ in range(len(graph.node) + 1):
        if name in inits:
            return numpy_helper.to_array(inits[name])
        node = producers.get(name)
        if node is None:
            return None
        if node.op_type == "Identity":
            name = node.input[0]
        elif node.op_type == "Constant":
            attr = next((a for a in node.attribute if a.name == "value"), None)
            return None if attr is None else numpy_helper.to_array(attr.t)
        else:
            return None
    return None


def _dims(value: onnx.ValueInfoProto) -> list[object]:
    """A value's shape: ints for fixed dimensions, names for symbolic ones."""
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in value.type.tensor_type.shape.dim]


def _check_model(model: onnx.ModelProto, where: str = "model") -> None:
    def fail(why: str) -> NoReturn:
        raise ValueError(f"{where}: {squeeze(why, 300)}")

    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        fail(f"onnx checker: {e}")
    opset = {o.domain: o.version for o in model.opset_import}.get("", None)
    if opset != OPSET:
        fail(f"default-domain opset is {opset}; the ML-Agents contract is {OPSET}")
    graph = model.graph
    for t in graph.initializer:
        if t.data_location == TensorProto.EXTERNAL:
            fail(f"initializer {t.name} is stored in an external file; the model must be self-contained")

    # inputs: obs_0..obs_{n-1} (rank 2 to 4, dynamic batch), then action_masks only with discrete outputs,
    # then recurrent_in only for a recurrent model
    inits = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    in_names = [i.name for i in inputs]
    n_obs = sum(1 for n in in_names if n.startswith("obs_"))
    expected = [f"obs_{i}" for i in range(n_obs)] + (["action_masks"] if "action_masks" in in_names else [])
    expected += [RECURRENT_IN] if RECURRENT_IN in in_names else []
    if not n_obs or in_names != expected:
        fail(f"inputs are {in_names}; expected obs_0.. obs_<n-1>, action_masks (discrete actions only), "
             "recurrent_in (memory only)")
    for i in inputs:
        dims = _dims(i)
        if i.type.tensor_type.elem_type != TensorProto.FLOAT:
            fail(f"input {i.name} is not float32")
        if i.name == RECURRENT_IN:
            continue  # checked with memory_size below
        if not 2 <= len(dims) <= 4 or isinstance(dims[0], int):
            fail(f"input {i.name} has shape {dims}; expected [batch, *observation shape] with a dynamic batch")

    # outputs: the contract's names in its order, with their dtypes
    outputs = {o.name: o for o in graph.output}
    out_names = [o.name for o in graph.output]
    has_cont, has_disc = "continuous_actions" in outputs, "discrete_actions" in outputs
    expected = ["version_number", "memory_size"]
    expected += list(CONTINUOUS_OUTPUTS) if has_cont else []
    expected += list(DISCRETE_OUTPUTS) if has_disc else []
    recurrent = RECURRENT_IN in in_names
    expected += [RECURRENT_OUT] if recurrent else []
    if out_names != expected:
        fail(f"outputs are {out_names}; expected {expected}")
    if not (has_cont or has_disc):
        fail("the model has no action output")
    if has_disc != ("action_masks" in in_names):
        fail("action_masks must be an input exactly when there are discrete actions")
    for name in out_names:
        elem = outputs[name].type.tensor_type.elem_type
        if elem != _OUTPUT_TYPES[name]:
            fail(f"output {name} is {TensorProto.DataType.Name(elem)}, expected "
                 f"{TensorProto.DataType.Name(_OUTPUT_TYPES[name])}")

    # constant outputs: float tensors, as Unity probes them
    def const(name: str, ndim: int) -> np.ndarray:
        value = _const_value(graph, name)
        if value is None:
            fail(f"output {name} is not a constant")
        if value.dtype != np.float32 or value.ndim != ndim or value.shape[0] != 1 or value.size < 1:
            fail(f"output {name} is {value.dtype} of shape {list(value.shape)}; Unity reads a float tensor")
        return value

    if const("version_number", 1).tolist() != [MODEL_EXPORT_VERSION]:
        fail(f"version_number is not [{MODEL_EXPORT_VERSION}]")
    memory_size = const("memory_size", 1)
    if not recurrent and memory_size.tolist() != [0.0]:
        fail(f"memory_size is {memory_size.tolist()} without recurrent_in; a feed-forward model has [0.0]")
    if recurrent:
        size = float(memory_size[0]) if memory_size.shape == (1,) else 0.0
        if size <= 0 or size % 2:
            fail(f"memory_size is {memory_size.tolist()}; a recurrent model has [an even memory size]")
        for value in (next(i for i in inputs if i.name == RECURRENT_IN), outputs[RECURRENT_OUT]):
            dims = _dims(value)
            if len(dims) != 3 or isinstance(dims[0], int) or dims[1:] != [1, int(size)]:
                fail(f"{value.name} has shape {dims}; expected [batch, 1, {int(size)}]")

    def check_actions(names: tuple[str, str], width: int) -> None:
        for name in names:
            dims = _dims(outputs[name])
            if len(dims) != 2 or dims[1] != width:
                fail(f"output {name} has shape {dims}; expected [batch, {width}]")
        if isinstance(_dims(outputs[names[0]])[0], int):
            fail(f"output {names[0]} has no dynamic batch dimension")

    if has_cont:
        n_cont = const("continuous_action_output_shape", 1)
        if n_cont.shape != (1,) or n_cont[0] < 1 or n_cont[0] != int(n_cont[0]):
            fail(f"continuous_action_output_shape is {n_cont.tolist()}; expected [number of continuous actions]")
        check_actions(("continuous_actions", "deterministic_continuous_actions"), int(n_cont[0]))
    if has_disc:
        branches = const("discrete_action_output_shape", 2)
        if np.any(branches < 1) or np.any(branches != branches.astype(np.int64)):
            fail(f"discrete_action_output_shape is {branches.tolist()}; expected [[size of each branch]]")
        check_actions(("discrete_actions", "deterministic_discrete_actions"), branches.shape[1])
        width = _dims(next(i for i in inputs if i.name == "action_masks"))
        if len(width) != 2 or width[1] != int(branches.sum()):
            fail(f"action_masks has shape {width}; expected [batch, {int(branches.sum())}] for branches "
                 f"{branches.astype(np.int64).tolist()[0]}")
