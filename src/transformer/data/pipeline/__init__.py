"""The input pipeline: text to token ids to padded batches, whichever corpus the text came from.

Tokenizers (the joint BPE model, its training, the Marian adapter and the protocol both meet), reading
line-aligned text files, the length filter, the token store on disk, and batching (the length-bucketed sampler
and collation into padded tensors). Nothing here knows a corpus by name.
"""
