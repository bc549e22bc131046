"""The numbers the actor is made of, in one place for its three implementations: the torch networks
that train (ml_arl.networks.actor_critic, attention, conditioning), the numpy muscle the workers act with
(ml_arl.acting.muscle) and the ONNX graph Unity runs (ml_arl.networks.onnx_export). A change here
changes all three; a copy in one of them would be a silent mismatch. No imports: workers read this
without torch."""

ACTION_CLAMP = 3.0  # a raw Gaussian sample is clamped to [-3, 3], then divided by 3 (ML-Agents' PPO)
MASK_LOGIT = -1e8  # the logit of a masked discrete action
NORM_CLIP = 5.0  # normalised observations are clamped to [-5, 5]
LOG_SIGMA_MIN, LOG_SIGMA_MAX = -20.0, 2.0  # ML-Agents' clamp of a state-dependent log sigma (SAC)
TANH_EPSILON = 1e-6  # log(1 - tanh(u)^2 + eps): the change of variables of a squashed Gaussian
LAYER_NORM_EPS = 1e-5  # parameter-free layer norms (attention, the goal hypernetwork), as torch's default
MEAN_EPSILON = 1e-7  # added to the number of entities present before the attention's mean
