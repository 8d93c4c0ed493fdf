def kernel(data):       # misnamed: the evaluator looks for custom_kernel
    return data[-1]
