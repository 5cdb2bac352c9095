"""The range of each search setting a user may choose, shared by the command line and the server.

``transformer translate``'s flags (:mod:`transformer.cli_arguments.search_options`) and the fields of
``POST /v1/translate`` (:mod:`transformer.serving.translate_request`) are bounded by these same numbers, so a
value the command refuses is refused by the server too, with the same range in the message. The server caps
the search width (beam, MBR candidates, samples) lower still: it shares its batch between clients.
"""

from transformer.typed_fields import MAX_SEED as TYPED_MAX_SEED

#: Largest ``--beam``: each beam multiplies the rows decoded together (memory and time), and translation
#: quality peaks at small beams (4 to 10) and falls beyond (Koehn and Knowles, 2017), so more is a typo.
MAX_BEAM = 64
#: Largest ``--alpha``: an exponent of the output length; at 10 the penalty already outweighs any
#: log-probability, and beyond about 12 |Y|^alpha overflows float32 for the longest outputs allowed.
MAX_ALPHA = 10.0
#: Largest ``--temperature``: at 100 the distribution is already flat to within 1% for any sane model.
MAX_TEMPERATURE = 100.0
#: Smallest ``--temperature`` and ``--top-p``: below, sampling is greedy search under another name (and a
#: temperature of 1e-300 turns the scaled log-probabilities into infinities).
MIN_TEMPERATURE = MIN_TOP_P = 0.01
#: Largest ``--epsilon``: a token of probability above 0.5 is the only one above it, so more is greedy.
MAX_EPSILON = 0.5
#: Largest ``--top-k``: beyond any vocabulary this project trains.
MAX_TOP_K = 1_000_000
#: Largest ``--mbr``: the utilities cost N(N - 1) comparisons per sentence; 256 is already 65,280.
MAX_MBR = 256
#: Largest ``--no-repeat-ngram``: longer n-grams hardly ever repeat inside one sentence.
MAX_NGRAM = 32
#: Largest ``--seed``: the config's (a signed 64-bit integer), so a flag and a config value agree.
MAX_SEED = TYPED_MAX_SEED
#: The least a sentence of a server request costs, in characters of ``--max-chars`` (which is at least this): a
#: one-character sentence still takes a batch row, an encoder pass and a decoder step per output token until its
#: end token, up to ``max_length_offset`` (50) steps for a model that rambles, about what a 50-character
#: sentence takes.
MIN_SENTENCE_CHARS = 50
