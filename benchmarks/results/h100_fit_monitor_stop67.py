"""Stop 67: the shipped H100 recipe's final fit (`autoheur train --data data/nvidia-h100-80gb-hbm3 --aux
data/nvidia-h200 --aux-new-only --aux-share 0.5 --heldout-folds 0`) with XGBoost's own monitor on (verbosity 3), which
prints each booster's timers when it is freed: where the fit's time goes. Run from the repository root."""

import gc

import xgboost as xgb

from autoheur.models.train import train

_fit = xgb.XGBRanker.fit


def fit(self, *a, **k):
    self.set_params(verbosity=3)
    return _fit(self, *a, **k)


xgb.XGBRanker.fit = fit
t = train("data/nvidia-h100-80gb-hbm3", heldout_folds=0, aux=["data/nvidia-h200"], aux_new_only=True, aux_share=0.5)
del t
gc.collect()  # the boosters' monitors print as they are freed
print("done", flush=True)
