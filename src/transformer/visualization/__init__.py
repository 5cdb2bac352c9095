"""Pictures of a model: attention maps (a static plot and an interactive page) and training curves.

``attention_inputs.py`` reads one sentence pair's attention from a checkpoint; ``attention_plot.py`` draws it with
matplotlib, ``attention_html.py`` and ``attention_page.py`` build the self-contained viewer the server's
``/v1/attention`` returns; ``checkpoint_attention.py`` is ``transformer attention``'s workflow and
``training_curves.py`` plots a run's metrics log.
"""
