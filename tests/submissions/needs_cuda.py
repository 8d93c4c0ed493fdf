

def custom_kernel(data):
    a, b, sfa, sfb, sfa_permuted, sfb_permuted, c = data
    return c.cuda()     # a GPU-only submission run on a machine without a GPU
