"""Language-model parts: adaptive input and softmax, relative attention (Transformer-XL), AWD-LSTM regularizers."""
