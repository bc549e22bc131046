"""The muscle: the actor's forward pass in numpy, run where the environment runs.

A trainer (the brain) learns with torch; workers act with a numpy copy of the actor, so a
worker process never imports torch (fast start, small memory) and no step waits on a round
trip to the main process. The maths mirrors ``ActorCritic.evaluate``; a unit test checks that
log-probabilities agree with torch.

With an LSTM (network_settings.memory) the muscle keeps one memory per agent id: zeros when the
agent first acts, carried from step to step, dropped by ``forget`` when its episode ends. Each
decision reports the memory it started from (``ActionInfo.memory``), which the agent processor
stores in the trajectory: the trainer replays sequences from these memories.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Protocol

import numpy as np
from mlagents_envs.base_env import ActionTuple
from numpy.lib.stride_tricks import sliding_window_view

from ml_arl.core.actor_constants import (
    ACTION_CLAMP,
    LAYER_NORM_EPS,
    LOG_SIGMA_MAX,
    LOG_SIGMA_MIN,
    MASK_LOGIT,
    MEAN_EPSILON,
    NORM_CLIP,
    TANH_EPSILON,
)
from ml_arl.core.actor_weights import (
    ActorWeights,
    Conv,
    Dense,
    EntityEncoderWeights,
    HyperLayerWeights,
    VisualEncoderWeights,
)

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def env_continuous(raw: np.ndarray) -> np.ndarray:
    """The continuous actions the environment receives for raw samples: clamp(a, -3, 3) / 3 (a new array)."""
    sent = np.minimum(raw, ACTION_CLAMP)
    np.maximum(sent, -ACTION_CLAMP, out=sent)
    sent /= ACTION_CLAMP
    return sent


class ActionInfo(NamedTuple):
    continuous: np.ndarray  # [B, n_cont] float32: the raw Gaussian sample, or tanh of it with tanh_squash (what the trainer scores)
    discrete: np.ndarray  # [B, n_branches] int32
    # [B, D] float32: the log-probability of each continuous dimension, then of each discrete branch's
    # choice (D = n_cont + n_branches; their sum is the joint one). PPO and POCA take one ratio per
    # column, as ML-Agents' trust_region_policy_loss does.
    log_prob: np.ndarray
    entropy: np.ndarray  # [B] float32
    allowed: Optional[np.ndarray]  # [B, sum(branches)] action masks used (True = allowed), None if no branches
    env_action: ActionTuple  # sent to the env: continuous clamp(a, -3, 3) / 3 (tanh-squashed: as is), as ML-Agents does
    memory: Optional[np.ndarray] = None  # [B, memory_size] the LSTM memory each agent acted from; None without memory
    extras: Optional[list[Any]] = None  # [B] what a user muscle hands its trainer with each decision (picklable); None: nothing


def masks_allowed(action_mask: Optional[list[np.ndarray]], n: int, branches: tuple[int, ...]) -> Optional[np.ndarray]:
    """mlagents_envs masks (per branch, True = forbidden) -> one [n, sum(branches)] allowed array."""
    if not branches:
        return None
    if action_mask is None:
        return np.ones((n, sum(branches)), dtype=bool)
    return ~np.concatenate(action_mask, axis=1) if len(action_mask) > 1 else ~action_mask[0]


def _conv_hwc(x: np.ndarray, conv: Conv) -> np.ndarray:
    """Convolution of [B, H, W, C] images (zero-padded by ``conv.padding``) with [kh, kw, C, out]
    weights -> [B, Ho, Wo, out]: the windows gathered once (im2col, in (kh, kw, C) order so each
    copied run is a pixel's channels), then one matrix product."""
    if conv.padding:
        p = conv.padding
        padded = np.zeros((x.shape[0], x.shape[1] + 2 * p, x.shape[2] + 2 * p, x.shape[3]), np.float32)
        padded[:, p:-p, p:-p] = x
        x = padded
    kh, kw, c, out = conv.w.shape
    windows = sliding_window_view(x, (kh, kw), axis=(1, 2))[:, :: conv.stride, :: conv.stride]
    # windows: [B, Ho, Wo, C, kh, kw] (a view); the reshape copies it into rows of kh * kw * C
    batch, ho, wo = windows.shape[:3]
    rows = windows.transpose(0, 1, 2, 4, 5, 3).reshape(batch * ho * wo, kh * kw * c)
    y = rows @ conv.w.reshape(kh * kw * c, out)
    y += conv.b
    return y.reshape(batch, ho, wo, out)


def _max_pool_hwc(x: np.ndarray, kernel: int, stride: int) -> np.ndarray:
    """Max-pooling of [B, H, W, C] (square kernel, no padding), one axis at a time."""
    ho, wo = (x.shape[1] - kernel) // stride + 1, (x.shape[2] - kernel) // stride + 1
    rows = x[:, : stride * (ho - 1) + 1 : stride].copy()
    for i in range(1, kernel):
        np.maximum(rows, x[:, i : i + stride * (ho - 1) + 1 : stride], out=rows)
    out = rows[:, :, : stride * (wo - 1) + 1 : stride].copy()
    for j in range(1, kernel):
        np.maximum(out, rows[:, :, j : j + stride * (wo - 1) + 1 : stride], out=out)
    return out


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def lstm_step(x: np.ndarray, memory: np.ndarray, w_ih: np.ndarray, w_hh: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One LSTM step (torch's gates: input, forget, cell, output) for [B, in] inputs and [B, 2H]
    memories [h, c]; returns the output h [B, H] and the new memory [B, 2H]."""
    hidden = w_hh.shape[0]
    h, c = memory[:, :hidden], memory[:, hidden:]
    gates = x @ w_ih + h @ w_hh + b
    i, f = _sigmoid(gates[:, :hidden]), _sigmoid(gates[:, hidden : 2 * hidden])
    g, o = np.tanh(gates[:, 2 * hidden : 3 * hidden]), _sigmoid(gates[:, 3 * hidden :])
    c = f * c + i * g
    h = o * np.tanh(c)
    return h, np.concatenate([h, c], axis=1).astype(np.float32)


def _leaky_relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.01 * x)


def _swish(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(x) = x / (1 + exp(-x)) (a new array). float32 exp is about twice as fast as tanh;
    where exp(-x) overflows to inf the quotient is the right limit, -0."""
    out = np.negative(x)
    with np.errstate(over="ignore"):
        np.exp(out, out=out)
    out += 1.0
    np.divide(x, out, out=out)
    return out


def hyper_layer(x: np.ndarray, features: np.ndarray, w: HyperLayerWeights, goal_columns: np.ndarray) -> np.ndarray:
    """A goal-conditioned dense layer (before its activation): the hypernetwork makes each row's
    [in, out] weights from the goal's columns of ``features``; [B, in] -> [B, out]."""
    g = features[:, goal_columns]
    for layer in w.hidden:
        y = g @ layer.w
        y += layer.b
        g = _swish(y)
    g -= g.mean(axis=1, keepdims=True)
    g /= np.sqrt(np.mean(g * g, axis=1, keepdims=True) + LAYER_NORM_EPS)
    flat = g @ w.flat.w
    flat += w.flat.b
    out = np.matmul(x[:, None, :], flat.reshape(x.shape[0], w.in_size, -1))[:, 0]
    out += w.bias
    return out


def _flatten_dense(x: np.ndarray, dense: Dense) -> np.ndarray:
    """The dense layer over [B, H, W, C] flattened channels-last (the weights' rows are in that order)."""
    y = x.reshape(x.shape[0], -1) @ dense.w
    y += dense.b
    return y


class _VisualEncoder:
    """numpy twin of the torch encoders of ``networks`` (images arrive channels-last, as the env
    sends them): ``simple``, ``nature_cnn``, ``match3`` and ``fully_connected`` are convolutions
    and a dense layer with LeakyReLU after each; ``resnet`` is stacks of convolution, max-pool and
    residual blocks, then Swish, the dense layer and ReLU."""

    def __init__(self, w: VisualEncoderWeights):
        self.w = w

    def __call__(self, img: np.ndarray) -> np.ndarray:
        x = img if img.dtype == np.float32 else img.astype(np.float32)
        w = self.w
        if w.kind == "resnet":
            for stack in w.stacks:
                x = _max_pool_hwc(_conv_hwc(x, stack.conv), stack.pool_kernel, stack.pool_stride)
                for block in stack.blocks:
                    x = x + _conv_hwc(_swish(_conv_hwc(_swish(x), block.conv_a)), block.conv_b)
            y = _flatten_dense(_swish(x), w.dense)
            np.maximum(y, 0.0, out=y)
            return y
        for conv in w.convs:
            x = _leaky_relu(_conv_hwc(x, conv))
        return _leaky_relu(_flatten_dense(x, w.dense))


def _layer_norm(x: np.ndarray) -> np.ndarray:
    """Parameter-free layer norm over the last axis (as torch's, epsilon 1e-5)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + LAYER_NORM_EPS)


def _dense(x: np.ndarray, dense: Dense) -> np.ndarray:
    y = x @ dense.w
    y += dense.b
    return y


class _EntityEncoder:
    """numpy twin of ``ml_arl.networks.attention.EntityEncoder``: the variable-length observations
    [B, E, size] (padding rows: squares summing below the threshold) and the encoding of the
    other observations -> entity embeddings -> residual self-attention -> mean over the entities
    present [B, width] (zeros when every entity is padding)."""

    def __init__(self, w: EntityEncoderWeights):
        self.w = w
        self.width = w.query.w.shape[1]

    def __call__(self, own: Optional[np.ndarray], obs: list[np.ndarray]) -> np.ndarray:
        w = self.w
        entities = [obs[i] if obs[i].dtype == np.float32 else obs[i].astype(np.float32) for i in w.indices]
        present = np.concatenate([np.einsum("bes,bes->be", x, x) >= w.padding_threshold for x in entities], axis=1)
        context = _swish(_dense(own, w.self_encoder)) if w.self_encoder is not None and own is not None else None
        embedded = []
        for x, dense in zip(entities, w.embeddings):
            if context is not None:
                x = np.concatenate([np.broadcast_to(context[:, None, :], (x.shape[0], x.shape[1], context.shape[1])), x], axis=2)
            embedded.append(_swish(_dense(x, dense)))
        x = _layer_norm(embedded[0] if len(embedded) == 1 else np.concatenate(embedded, axis=1))
        batch, count, width = x.shape
        head = width // w.heads

        def split(t: np.ndarray) -> np.ndarray:  # [B, E, W] -> [B, heads, E, W / heads]
            return t.reshape(batch, count, w.heads, head).transpose(0, 2, 1, 3)

        q, k, v = split(_dense(x, w.query)), split(_dense(x, w.key)), split(_dense(x, w.value))
        scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(width))
        scores = np.where(present[:, None, None, :], scores, np.float32(-1e6))
        scores -= scores.max(axis=-1, keepdims=True)
        p = np.exp(scores)
        p /= p.sum(axis=-1, keepdims=True)
        attended = (p @ v).transpose(0, 2, 1, 3).reshape(batch, count, width)
        y = _layer_norm(_dense(attended, w.out) + x)
        weights = present.astype(np.float32)[..., None]
        return ((y * weights).sum(axis=1) / (weights.sum(axis=1) + np.float32(MEAN_EPSILON))).astype(np.float32)


class Acting(Protocol):
    """What a worker needs of a muscle: ml_arl's ``Muscle`` or a user class named by a trainer's
    policy snapshot (``pkg.module:Class``, built as ``Class(weights, deterministic, seed)``). A
    recurrent one (``memory_size`` above 0, an optional attribute) is also called
    ``act(obs, allowed, agent_ids)`` and ``forget(agent_ids)`` (``forget()`` after a reset)."""

    deterministic: bool  # the worker sets it with each policy (the class need not define it)
    branches: tuple[int, ...]

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray], *agent_ids: Any) -> ActionInfo: ...

    def set_weights(self, weights: Any) -> None: ...

    def forget(self, agent_ids: Optional[np.ndarray] = None) -> None: ...


ACTING_NEEDS = ("act", "set_weights", "branches")  # what every muscle has (forget: recurrent ones)


class Muscle:
    def __init__(self, weights: ActorWeights, deterministic: bool = False, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.deterministic = deterministic
        self.memories: dict[int, np.ndarray] = {}  # agent id -> [memory_size] (with an LSTM)
        self.set_weights(weights)

    def set_weights(self, w: ActorWeights) -> None:
        self.swish = w.activation == "swish"
        # Swish(x) = x * sigmoid(x) = y + y * tanh(y) with y = x / 2: the halving is folded
        # into each layer's weights.
        scale = 0.5 if self.swish else 1.0
        self.layers = [(scale * layer.w, scale * layer.b) for layer in w.body]
        self.mu_w, self.mu_b = w.mu.w, w.mu.b
        self.log_sigma = (w.log_sigma.w, w.log_sigma.b) if w.log_sigma is not None else None
        self.tanh_squash = w.tanh_squash
        self.log_std = w.log_std
        self.std = np.exp(self.log_std)
        self.logits_w, self.logits_b = w.logits.w, w.logits.b
        self.norm = (w.norm_mean, w.norm_std) if w.norm_mean is not None and w.norm_std is not None else None
        self.visual = list(w.visual)
        self.encoders = [_VisualEncoder(enc) for enc in w.encoders]
        self.entities = _EntityEncoder(w.entities) if w.entities is not None else None
        self.not_vector = set(self.visual) | (set(w.entities.indices) if w.entities is not None else set())
        self.branches = tuple(w.branches)
        self.n_cont = self.mu_b.shape[0]
        # entropy: mean over continuous dimensions (as ML-Agents), summed over discrete branches
        self._cont_entropy = float(np.mean(0.5 + _LOG_SQRT_2PI + self.log_std)) if self.n_cont else 0.0
        self._cont_logp_const = -(self.log_std + _LOG_SQRT_2PI).astype(np.float32)  # [n_cont]
        self._offsets = np.cumsum((0,) + self.branches)
        self.hyper = w.hyper
        self.goal_columns = np.asarray(w.hyper.goal_columns, np.intp) if w.hyper is not None else np.zeros(0, np.intp)
        self.lstm = w.lstm
        self.memory_size = 2 * w.lstm.w_hh.shape[0] if w.lstm is not None else 0
        if any(m.shape[0] != self.memory_size for m in self.memories.values()):
            self.memories.clear()  # another layout: the kept memories mean nothing to it

    def forget(self, agent_ids: Optional[np.ndarray] = None) -> None:
        """Drop the memories of agents whose episode ended (every agent's when None)."""
        if agent_ids is None:
            self.memories.clear()
        else:
            for agent_id in agent_ids.tolist():
                self.memories.pop(agent_id, None)

    def _recurrent(self, h: np.ndarray, agent_ids: Optional[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        """The LSTM step from each agent's kept memory (zeros for a new agent); keeps the new memories."""
        assert self.lstm is not None
        before = np.zeros((h.shape[0], self.memory_size), np.float32)
        ids: list[int] = agent_ids.tolist() if agent_ids is not None else []
        for row, agent_id in enumerate(ids):
            kept = self.memories.get(agent_id)
            if kept is not None:
                before[row] = kept
        out, after = lstm_step(h, before, self.lstm.w_ih, self.lstm.w_hh, self.lstm.b)
        for row, agent_id in enumerate(ids):
            self.memories[agent_id] = after[row]
        return out.astype(np.float32), before

    def act(self, obs: list[np.ndarray], allowed: Optional[np.ndarray], agent_ids: Optional[np.ndarray] = None) -> ActionInfo:
        """Actions for one batch of agents. With an LSTM, ``agent_ids`` names whose memory each row
        continues (None: every row starts from zeros and nothing is kept)."""
        cont: np.ndarray
        if self.not_vector:
            h = self._features(obs)
        else:
            x = obs[0].reshape(obs[0].shape[0], -1) if len(obs) == 1 else np.concatenate(
                [o.reshape(o.shape[0], -1) for o in obs], axis=1
            )
            h = self._normalized(x)
        features = h
        for w, b in self.layers:
            y = h @ w
            y += b  # swish: y = x / 2
            t = np.tanh(y)
            if self.swish:
                t *= y
                t += y  # t = swish(x)
            h = t
        if self.hyper is not None:  # goal conditioning: the body's last layer
            z = hyper_layer(h, features, self.hyper, self.goal_columns)
            h = _swish(z) if self.swish else np.tanh(z)
        memory = None
        if self.lstm is not None:
            h, memory = self._recurrent(h, agent_ids)
        batch = h.shape[0]
        if self.n_cont:
            mu = h @ self.mu_w
            mu += self.mu_b
            if self.log_sigma is not None:
                cont, log_prob, entropy, clipped = self._act_conditional(h, mu)
            else:
                if self.deterministic:
                    cont = mu
                    log_prob = np.broadcast_to(self._cont_logp_const, mu.shape).astype(np.float32)
                else:
                    noise = self.rng.standard_normal(mu.shape, dtype=np.float32)
                    cont = noise * self.std
                    cont += mu
                    # (cont - mu) / std is the noise itself
                    log_prob = noise * noise
                    log_prob *= -0.5
                    log_prob += self._cont_logp_const
                entropy = np.full(batch, self._cont_entropy, np.float32)
                clipped = env_continuous(cont)
        else:
            cont = clipped = np.zeros((batch, 0), np.float32)
            log_prob = np.zeros((batch, 0), np.float32)
            entropy = np.zeros(batch, np.float32)
        disc = np.zeros((batch, len(self.branches)), np.int32)
        branch_log_probs = np.zeros((batch, len(self.branches)), np.float32)
        if self.branches:
            logits = h @ self.logits_w + self.logits_b
            if allowed is not None:
                logits = np.where(allowed, logits, MASK_LOGIT)
            for i in range(len(self.branches)):
                lg = logits[:, self._offsets[i] : self._offsets[i + 1]]
                lg = lg - lg.max(axis=1, keepdims=True)
                p = np.exp(lg)
                p /= p.sum(axis=1, keepdims=True)
                if self.deterministic:
                    choice = p.argmax(axis=1)
                else:
                    cdf = np.cumsum(p, axis=1)
                    u = self.rng.random((batch, 1)) * cdf[:, -1:]  # never past the last allowed action
                    choice = np.minimum((cdf < u).sum(axis=1), self.branches[i] - 1)
                disc[:, i] = choice
                logp = lg - np.log(np.exp(lg).sum(axis=1, keepdims=True))
                branch_log_probs[:, i] = logp[np.arange(batch), choice]
                entropy -= np.sum(np.where(p > 0, p * logp, 0.0), axis=1)
        if self.branches:
            log_prob = np.concatenate([log_prob, branch_log_probs], axis=1) if self.n_cont else branch_log_probs
        env_action = ActionTuple(continuous=clipped, discrete=disc)
        return ActionInfo(cont, disc, log_prob, entropy, allowed if self.branches else None, env_action, memory)

    def _act_conditional(self, h: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """SAC's actor: log std from its own head (clamped to [-20, 2]); with tanh_squash the action
        is tanh(sample), stored and sent as it is. Returns (stored, log_prob [B, n_cont], entropy, sent)."""
        assert self.log_sigma is not None
        log_std = np.clip(h @ self.log_sigma[0] + self.log_sigma[1], LOG_SIGMA_MIN, LOG_SIGMA_MAX)
        entropy = np.mean(0.5 + _LOG_SQRT_2PI + log_std, axis=1).astype(np.float32)
        if self.deterministic:
            raw = mu
            noise = np.zeros_like(mu)
        else:
            noise = self.rng.standard_normal(mu.shape, dtype=np.float32)
            raw = mu + noise * np.exp(log_std)
        log_prob = (-0.5 * noise * noise - (log_std + _LOG_SQRT_2PI)).astype(np.float32)
        if not self.tanh_squash:
            raw = raw.astype(np.float32)
            return raw, log_prob, entropy, env_continuous(raw)
        action = np.tanh(raw).astype(np.float32)
        log_prob -= np.log(1.0 - action * action + TANH_EPSILON).astype(np.float32)
        return action, log_prob, entropy, action

    def _normalized(self, x: np.ndarray) -> np.ndarray:
        if self.norm is not None:
            x = (x - self.norm[0]) / self.norm[1]
            np.minimum(x, NORM_CLIP, out=x)
            np.maximum(x, -NORM_CLIP, out=x)
        return x if x.dtype == np.float32 else x.astype(np.float32)

    def _features(self, obs: list[np.ndarray]) -> np.ndarray:
        """[normalised vector observations, image encodings, entity attention], as ``ObservationEncoder``."""
        vectors = [o.reshape(o.shape[0], -1) for i, o in enumerate(obs) if i not in self.not_vector]
        feats = []
        if vectors:
            feats.append(self._normalized(vectors[0] if len(vectors) == 1 else np.concatenate(vectors, axis=1)))
        feats += [enc(obs[i]) for i, enc in zip(self.visual, self.encoders)]
        if self.entities is not None:
            own = (feats[0] if len(feats) == 1 else np.concatenate(feats, axis=1)) if feats else None
            feats.append(self.entities(own, obs))
        return feats[0] if len(feats) == 1 else np.concatenate(feats, axis=1)
