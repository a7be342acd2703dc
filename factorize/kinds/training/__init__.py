"""The training plan kind (a long-horizon Toeplitz strategy for DP training under
multi-participation, run as a noise stream inside the training loop): ``kind.KIND``
(``factorize.kinds``); ``stream.open_stream`` opens a verified plan's stream."""
