"""The call that fitted stop 65's shipped H100 model, run as `python3 h100_train_stop65.py` from the repository root
while `autoheur train --aux-share` was being added; the same as `autoheur train --data data/nvidia-h100-80gb-hbm3 --aux
data/nvidia-h200 --aux-new-only --aux-share 0.5` (the output paths aside)."""

from autoheur.models.train import train

m = train(
    "data/nvidia-h100-80gb-hbm3",
    aux=["data/nvidia-h200"],
    aux_new_only=True,
    params={"aux_share": 0.5},
    heldout_problems="/tmp/s65/h100_heldout_stop65_auxhalf.csv",
)
m.save("/tmp/s65/m/h100_auxhalf.joblib")
print("saved")
