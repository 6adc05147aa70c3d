"""Writes 02-data-parallel-torch.ipynb (run: python notebooks/make_02.py)."""
from _make import code, md, write

cells = [
    md("# 02 · Data-parallel torch\n\n"
       "A small torch classifier trained data-parallel: every batch is split across the "
       "devices by a work load, one persistent replica per device runs its share (each on "
       "its own thread), the gradients are summed weighted by each share, the optimizer steps "
       "once and the parameters go back to every replica.\n\n"
       "With GPUs the devices are `cuda:0`, `cuda:1`, …; here, without one, two CPU "
       "\"devices\" stand in. To show what `work_load=\"auto\"` does, device 1 is slowed on "
       "purpose (its replica sleeps a little per row): the trainer measures each device's "
       "speed and moves rows to the faster one."),
    code("import time\n"
         "import numpy as np\n"
         "import torch\n"
         "import labkit as lk\n"
         "from sklearn.datasets import load_digits\n\n"
         "torch.manual_seed(0)\n"
         "digits = load_digits()\n"
         "order = np.random.default_rng(0).permutation(len(digits.target))\n"
         "x = torch.tensor(digits.data[order] / 16.0, dtype=torch.float32)\n"
         "y = torch.tensor(digits.target[order])\n"
         "x_train, y_train, x_test, y_test = x[:1400], y[:1400], x[1400:], y[1400:]\n"
         "batches = [(x_train[i:i + 100], y_train[i:i + 100]) for i in range(0, 1400, 100)]\n"
         "devices = ([f'cuda:{i}' for i in range(torch.cuda.device_count())]\n"
         "           if torch.cuda.device_count() > 1 else ['cpu:0', 'cpu:1'])\n"
         "print('devices:', devices)"),
    code("model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(),\n"
         "                            torch.nn.Linear(128, 10))\n"
         "optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)\n"
         "trainer = lk.DataParallelTrainer(model, torch.nn.functional.cross_entropy, optimizer,\n"
         "                                 devices=devices, work_load='auto')\n\n"
         "def sleeper(seconds_per_row):\n"
         "    return lambda module, inputs: time.sleep(seconds_per_row * len(inputs[0]))\n\n"
         "if devices[1].startswith('cpu'):  # stand-in devices: device 1 at half the speed of 0\n"
         "    trainer.replicas[0].register_forward_pre_hook(sleeper(1e-4))\n"
         "    trainer.replicas[1].register_forward_pre_hook(sleeper(2e-4))\n"
         "trainer"),
    md("## Watch it train\n\n"
       "`lk.board(trainer)` shows a progress bar per epoch, the load of each device (busy "
       "fraction, samples per second, its share of the batch) and the loss curve as it falls."),
    code("board = lk.board(trainer)\n"
         "board"),
    code("history = trainer.fit(batches, epochs=6)\n"
         "for h in history:\n"
         "    print(f\"epoch {h['epoch']}: loss {h['loss']:.3f}, {h['samples_per_s']:.0f} samples/s\")\n"
         "print('shares:', [round(s, 2) for s in trainer.shares])"),
    md("## Evaluate\n\n"
       "Evaluation runs on the replicas in parallel too; metrics are weighted by rows."),
    code("scores = trainer.evaluate([(x_test, y_test)],\n"
         "                          metrics={'accuracy': lambda out, t: (out.argmax(1) == t).float().mean()})\n"
         "print(f\"test accuracy: {scores['accuracy']:.3f}\")\n"
         "print(f\"test loss: {scores['loss']:.3f}\")"),
    code("trainer.close()      # stops the replica threads; the board draws its last frame\n"
         "print('trainer closed:', trainer.closed)"),
]
write("02-data-parallel-torch.ipynb", cells)
