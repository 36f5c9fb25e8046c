import random
def ge(p,b):
    r=1/b; P=r*p/(1-p); bad=random.random()<p
    while True:
        yield bad
        bad = (random.random()>=r) if bad else (random.random()<P)
def trial(k,r,d,n,g):
    # block: d groups, data interleaved then parity interleaved
    lost=[0]*d
    for i in range(k):
        for j in range(d):
            if next(g): lost[j]+=1
    for i in range(r):
        for j in range(d):
            if next(g): lost[j]+=1
    return sum(1 for x in lost if x>r)
random.seed(1)
for (k,r,d) in [(8,6,4),(16,6,4),(4,6,4),(2,6,4),(16,12,4),(8,8,4),(32,12,2),(97,37,2)]:
    g=ge(0.05,4); N=200000; f=0
    for _ in range(N): f+=trial(k,r,d,N,g)>0
    print(k,r,d,'block fail %.2e'%(f/N), 'per data pkt %.2e'%(f/N/(k*d)))
