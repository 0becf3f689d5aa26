"""RS2 without replacement, the authors' selection function, transcribed for a fidelity test.

Source: github.com/PatrikOkanovic/RS2 at commit 99edfc8a323abc8da09217165ecf57fb569240ea,
src/DeepCore/deepcore/methods/uniform_no_replacement.py (class UniformNoReplacement) and the
one line of coresetmethod.py it inherits (coreset_size). Licence: the repository has no licence
file at that commit; this is the selection logic only, transcribed line for line, kept out of the
package and used by tests/test_policies_2026.py alone.

Changed from the source, and only this: the dataset and args are replaced by `n_train`; the
shuffle is a parameter (the source calls np.random.shuffle, seeded once by np.random.seed), so a
test can give it the policy's own random draws and compare the slicing, which is the method.
"""

import numpy as np


class UniformNoReplacement:
    def __init__(self, n_train, fraction=0.5, shuffle=np.random.shuffle):
        self.n_train = n_train
        self.coreset_size = round(self.n_train * fraction)  # CoresetMethod.__init__
        self.all_index = np.arange(self.n_train)
        self.shuffle = shuffle
        self.start, self.end = None, None

    def sample(self):
        if self.start < self.end:
            return self.all_index[self.start : self.end]
        else:
            return np.concatenate((self.all_index[self.start :], self.all_index[: self.end]))

    def reset(self):
        self.start = 0
        self.end = self.coreset_size
        self.shuffle(self.all_index)

    def select(self, **kwargs):
        if self.start is None or self.end < self.start or self.end == len(self.all_index):
            self.reset()
        else:
            self.start = self.end
            self.end = (self.end + self.coreset_size) % (len(self.all_index) + 1)
        return {"indices": self.sample()}, 0
