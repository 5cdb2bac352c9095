"""Baselines the Transformer is compared with: the attentional LSTM encoder-decoder it replaced.

``rnn_config.py`` holds :class:`RNNConfig`, ``rnn_attention.py`` the global attention (dot, general,
additive), ``rnn.py`` the model :class:`RNNEncoderDecoder` and ``rnn_step_model.py`` its adapter to the
searches. A YAML ``model`` section with ``architecture: rnn`` selects it; everything else (tokenizer, batches,
loss, trainer, checkpoints, averaging, searches, command line) is shared with the Transformer.
"""

from transformer.baselines.rnn import RNNEncoderDecoder
from transformer.baselines.rnn_config import RNNConfig

__all__ = ["RNNConfig", "RNNEncoderDecoder"]
