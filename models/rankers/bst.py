"""BST ranker: transformer over [target + history items] (Chen et al., DLP-KDD 2019).

    s_0   = t + P[bucket(0)]                          target item (position: gap 0)
    s_i   = h_i + P[bucket(gap_i)]   i = 1..L         history items (outcomes included),
                                                      most recent first; P is the
                                                      time-gap bucket embedding (BST §2.2)
    S'    = Block^n([s_0, s_1, .., s_L], mask = [1, m_1, .., m_L])   (models/layers/transformer.py;
            relative_positions=True adds Shaw et al. edge vectors for clip(j - i, ±K))
    z     = MLP_leakyrelu([e_1..e_F, numerics, S'_0, Σ_i m_i S'_i / Σ_i m_i])

The target sits at position 0 so relative distances are recency differences. The history
positions that are padding in every row of the batch are dropped first (`trim_padding`:
the same outputs, on the positions some row uses; one request is one user's history).
"""
import tf_keras as keras
import tensorflow as tf

from models.layers._utils import masked_mean, trim_padding
from models.layers.feature_layer import FeatureLayer, mlp, model_inputs
from models.heads import compile_ranker
from models.layers.time_gap import TimeGapBucketEmbedding
from models.layers.transformer import TransformerEncoderBlock


def build_bst(vocab_sizes: dict, history_length: int, embedding_dim: int = 16, oov_buckets: int = 1,
              learning_rate: float = 1e-3, loss_weights=None, heads=None, num_blocks: int = 1,
              num_heads: int = 2, ffn_units=None, dropout_rate: float = 0.1,
              relative_positions: bool = False, max_relative_position: int = 8,
              time_gap_buckets: int = 16, mlp_hidden_units=(128, 64),
              embedding_init_std: float = 0.01, **compile_options) -> keras.Model:
    if int(num_blocks) < 1:
        raise ValueError(f"BST: num_blocks must be >= 1, got {num_blocks}")
    inputs = model_inputs(history_length)
    layer = FeatureLayer(vocab_sizes, embedding_dim=embedding_dim, oov_buckets=oov_buckets,
                         embedding_init_std=embedding_init_std, name="features")
    if layer.item_dim % int(num_heads):
        raise ValueError(f"BST: item width {layer.item_dim} is not divisible by num_heads={num_heads}")
    feats = layer(inputs)
    gaps = TimeGapBucketEmbedding(output_dim=layer.item_dim, num_buckets=int(time_gap_buckets),
                                  name="time_gap_position")
    target = feats["target_item"][:, tf.newaxis, :] + gaps(tf.zeros_like(feats["history_gap_s"][:, :1]))
    history, history_mask = keras.layers.Lambda(lambda t: trim_padding(t[0], t[1]), name="trim_padding")(
        [feats["history"] + gaps(feats["history_gap_s"]), feats["history_mask"]])
    seq = keras.layers.Concatenate(axis=1, name="sequence")([target, history])
    mask = keras.layers.Concatenate(axis=1, name="sequence_mask")(
        [tf.ones_like(feats["history_mask"][:, :1]), history_mask])
    for n in range(int(num_blocks)):
        seq = TransformerEncoderBlock(num_heads=int(num_heads), key_dim=layer.item_dim // int(num_heads),
                                      ffn_units=ffn_units, dropout_rate=dropout_rate,
                                      relative_positions=relative_positions,
                                      max_relative_position=int(max_relative_position),
                                      name=f"transformer_{n}")(seq, mask=mask)
    hist_out = keras.layers.Lambda(lambda t: masked_mean(t[0], t[1]), name="history_mean")(
        [seq[:, 1:], history_mask])
    z = keras.layers.Concatenate(name="bst_input")(
        [feats["fields_flat"], feats["numerics"], seq[:, 0], hist_out])
    z = mlp(z, mlp_hidden_units, lambda name: keras.layers.LeakyReLU(alpha=0.2, name=name), name="mlp")
    return compile_ranker(inputs, z, heads, learning_rate=learning_rate, loss_weights=loss_weights,
                          name="bst", **compile_options)

