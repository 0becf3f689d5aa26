"""Training a run: its parts built, the trainer and its loop, each epoch's end, the learning rate, devices, collectives, checkpoints."""
