"""A user workload: a small multi-layer perceptron classifier, written once for Keras (every
Keras 3 backend, and Keras 2) and natively for PyTorch, JAX and NumPy.

The runner reads this file with `ast` on the host (it never imports it there) and imports it in
each environment's worker. `spec` carries batch_size, precision, options, device ("cpu" or
"gpu"), seed, task, api, backend, jit, the Keras in use (spec.keras) and spec.compile (the
matrix's jit axis applied to a function: torch.compile, jax.jit, tf.function). See
docs/user-workloads.md for the whole contract.
"""

import numpy as np

FEATURES = 32
CLASSES = 10
SAMPLES = 2048          # the data set keras_data hands the runner (fit loops over it in epochs)
# The Keras model starts from initial_weights below, as the native steps do, so that every API
# computes the same logits and the same-answer check compares Keras with native. Without this
# the runner redraws a Keras model's random weights from the seed (the same on every backend).
KEEP_WEIGHTS = True


def layer_sizes(spec):
    units = spec.options["units"]
    return [FEATURES] + [units] * spec.options["layers"] + [CLASSES]


def dataset(spec):
    """Seeded inputs and labels: the same numbers in every environment."""
    rng = np.random.default_rng(spec.seed)
    x = rng.standard_normal((SAMPLES, FEATURES), dtype=np.float32)
    y = (x[:, :CLASSES] ** 2).argmax(axis=1).astype(np.int32)
    return x, y


def initial_weights(spec):
    """Glorot-uniform kernels and zero biases from NumPy, for the native implementations."""
    rng = np.random.default_rng([spec.seed, 1])
    sizes = layer_sizes(spec)
    weights = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        weights.append(rng.uniform(-limit, limit, (fan_in, fan_out)).astype(np.float32))
        weights.append(np.zeros(fan_out, np.float32))
    return weights


# --- optional hooks -------------------------------------------------------------------------

def answer(spec, output):
    """The same-answer check's fingerprint: the logits of the first batch from the initial
    weights. A Keras cell hands its prediction before training (fit and predict alike), a
    predict step its output. A native fit step's output is its loss after the timed steps,
    which depends on how many ran: nothing to compare, so no answer."""
    if spec.task == "fit" and spec.api not in ("keras", "tf-keras"):
        return {}
    logits = np.asarray(output, dtype=np.float64)
    return {"logits_rms": float(np.sqrt(np.mean(logits ** 2))),
            "first_row": [float(v) for v in logits[0]]}


def flops_per_step(spec):
    """Multiply-adds of one batch through the layers (×3 for a training step: forward, and the
    two products of the backward pass)."""
    sizes = layer_sizes(spec)
    forward = 2 * spec.batch_size * sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    return 3 * forward if spec.task == "fit" else forward


# --- Keras: one model for every backend -----------------------------------------------------

def keras_model(spec):
    keras = spec.keras                      # Keras 3, or tf_keras in a Keras 2 environment
    layers = [keras.Input((FEATURES,))]
    layers += [keras.layers.Dense(spec.options["units"], activation="relu")
               for _ in range(spec.options["layers"])]
    model = keras.Sequential(layers + [keras.layers.Dense(CLASSES)])
    model.set_weights(initial_weights(spec))            # kernels (in, out) and biases, in order
    model.compile(optimizer=keras.optimizers.Adam(learning_rate=1e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=spec.jit_compile, steps_per_execution=spec.steps_per_execution)
    return model


def keras_data(spec):
    return dataset(spec)


# --- PyTorch --------------------------------------------------------------------------------

def torch_modules(spec):
    import torch

    device = "cuda" if spec.device == "gpu" else "cpu"
    dtype = torch.bfloat16 if spec.precision == "bfloat16" else torch.float32
    sizes = layer_sizes(spec)
    mods = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        mods += [torch.nn.Linear(fan_in, fan_out), torch.nn.ReLU()]
    net = torch.nn.Sequential(*mods[:-1])
    with torch.no_grad():
        linears = [m for m in net if isinstance(m, torch.nn.Linear)]
        weights = initial_weights(spec)
        for linear, kernel, bias in zip(linears, weights[0::2], weights[1::2]):
            linear.weight.copy_(torch.from_numpy(kernel.T))
            linear.bias.copy_(torch.from_numpy(bias))
    net = net.to(device, dtype)
    x, y = dataset(spec)
    batch = slice(0, spec.batch_size)
    return torch, net, torch.from_numpy(x[batch]).to(device, dtype), \
        torch.from_numpy(y[batch]).long().to(device)


def torch_fit(spec):
    torch, net, x, y = torch_modules(spec)
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    loss_fn = torch.nn.CrossEntropyLoss()

    def train_step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(net(x), y)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return spec.compile(train_step)


def torch_predict(spec):
    torch, net, x, _ = torch_modules(spec)
    forward = spec.compile(net)

    def predict_step():
        with torch.no_grad():
            return forward(x)

    return predict_step


# Hugging Face's stack (api = "hf") is native PyTorch too: the same steps run there.
hf_fit = torch_fit
hf_predict = torch_predict


# --- JAX ------------------------------------------------------------------------------------

def jax_setup(spec):
    import jax
    import jax.numpy as jnp

    dtype = jnp.bfloat16 if spec.precision == "bfloat16" else jnp.float32
    params = [jnp.asarray(w, dtype) for w in initial_weights(spec)]
    x, y = dataset(spec)
    batch = slice(0, spec.batch_size)

    def forward(params, x):
        for i in range(0, len(params) - 2, 2):
            x = jax.nn.relu(x @ params[i] + params[i + 1])
        return x @ params[-2] + params[-1]

    return jax, jnp, params, forward, jnp.asarray(x[batch], dtype), jnp.asarray(y[batch])


def jax_fit(spec):
    jax, jnp, params, forward, x, y = jax_setup(spec)

    def loss_fn(params):
        logits = forward(params, x).astype(jnp.float32)
        return -jnp.mean(jax.nn.log_softmax(logits)[jnp.arange(len(y)), y])

    @spec.compile
    def update(params):
        loss, grads = jax.value_and_grad(loss_fn)(params)
        return [p - 1e-3 * g for p, g in zip(params, grads)], loss

    state = {"params": params}

    def train_step():
        state["params"], loss = update(state["params"])
        return loss

    return train_step


def jax_predict(spec):
    _, _, params, forward, x, _ = jax_setup(spec)
    predict = spec.compile(forward)
    return lambda: predict(params, x)


# --- NumPy ----------------------------------------------------------------------------------

def numpy_predict(spec):
    params = initial_weights(spec)
    x = dataset(spec)[0][:spec.batch_size]

    def predict_step():
        h = x
        for i in range(0, len(params) - 2, 2):
            h = np.maximum(h @ params[i] + params[i + 1], 0.0)
        return h @ params[-2] + params[-1]

    return predict_step
